//! The admin page's forms over HTTP, against the real server: a refused form comes back as it
//! was filled in, with the error beside the field at fault and the API's status, and nothing
//! changed; the new destination's form asks for one kind's fields at a time, each with where
//! its value is found; the settings speak in words and offer the time zones the server knows.
//! `admin_browser.rs` looks at the same forms in a real browser.

use crate::admin_page::{csrf_of, form, get_page, logged_in, post_form};
use crate::support::{Request, Response, TestServer};

/// The markup of the `<label>` holding the field named `name`: from the label's start to its
/// end, so that what is beside the field is found there and nowhere else.
fn label_of(page: &Response, name: &str) -> String {
    let text = page.text();
    let field = text
        .find(&format!("name=\"{name}\""))
        .unwrap_or_else(|| panic!("no field {name}: {text}"));
    let start = text[..field].rfind("<label").unwrap();
    let end = field + text[field..].find("</label>").unwrap();
    text[start..end].to_owned()
}

#[tokio::test]
async fn a_refused_link_is_shown_again_as_typed_with_the_error_beside_the_slug() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/links").await;
    let csrf = csrf_of(&page);
    let body = format!(
        "csrf={csrf}&slug=spring+sale&bot=shop_bot&campaign_name=spring%26summer&mode=page"
    );
    let refused = post_form(&server, Some(&cookie), form("/admin/spaces/a/links", &body)).await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    let slug = label_of(&refused, "slug");
    assert!(
        slug.contains("value=\"spring sale\"") && slug.contains("class=\"fault\""),
        "{slug}"
    );
    assert!(label_of(&refused, "bot").contains("value=\"shop_bot\""));
    assert!(
        label_of(&refused, "campaign_name").contains("value=\"spring&#38;summer\""),
        "escaped by the template"
    );
    assert!(!label_of(&refused, "bot").contains("class=\"fault\""));
    assert!(refused.text().contains("<option value=\"page\" selected>"));
    assert!(
        refused
            .text()
            .contains("role=\"alert\">Nothing was changed: ")
    );
    // Nothing was created, and a fresh page is empty again.
    let links = server
        .send(
            &Request::get("/links").header("Authorization", format!("Bearer {}", server.a.secret)),
        )
        .await;
    assert_eq!(links.json()["links"].as_array().unwrap().len(), 0);
    let fresh = get_page(&server, Some(&cookie), "/admin/spaces/a/links").await;
    assert!(label_of(&fresh, "slug").contains("value=\"\""));
    assert!(!fresh.text().contains("class=\"fault\""));
}

#[tokio::test]
async fn a_refused_space_name_is_kept_beside_its_error() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let page = get_page(&server, Some(&cookie), "/admin/").await;
    let csrf = csrf_of(&page);
    let refused = post_form(
        &server,
        Some(&cookie),
        form("/admin/spaces", &format!("csrf={csrf}&name=My+Shop")),
    )
    .await;
    assert_eq!(refused.status, 422);
    let name = label_of(&refused, "name");
    assert!(
        name.contains("value=\"My Shop\"") && name.contains("a space name is 1 to 32"),
        "{name}"
    );
}

#[tokio::test]
async fn the_destinations_form_asks_for_one_kind_at_a_time_with_where_to_find_each_field() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/destinations").await;
    let text = page.text();
    // Before a kind is chosen: the kinds as links, no field of any kind.
    for kind in [
        "meta_capi",
        "tiktok_events",
        "snap_capi",
        "postback",
        "webhook",
        "google_ads",
    ] {
        assert!(
            text.contains(&format!(
                "/admin/spaces/a/destinations?kind={kind}#new-destination"
            )),
            "{kind}"
        );
    }
    assert!(!text.contains("name=\"pixel_id\"") && !text.contains("Create destination"));

    let meta = get_page(
        &server,
        Some(&cookie),
        "/admin/spaces/a/destinations?kind=meta_capi",
    )
    .await;
    let text = meta.text();
    assert!(text.contains("<input type=\"hidden\" name=\"kind\" value=\"meta_capi\">"));
    let pixel = label_of(&meta, "pixel_id");
    assert!(
        pixel.contains("Pixel (dataset) id (required)")
            && pixel.contains("Events Manager: Data sources"),
        "{pixel}"
    );
    assert!(label_of(&meta, "api_version").contains("Default: v"));
    assert!(label_of(&meta, "access_token").contains("type=\"password\""));
    for other in ["pixel_code", "url", "statuses", "conversion_names"] {
        assert!(!text.contains(&format!("name=\"{other}\"")), "{other}");
    }
    assert!(
        !text.contains("(Meta, TikTok)"),
        "no label names another kind"
    );

    let snap = get_page(
        &server,
        Some(&cookie),
        "/admin/spaces/a/destinations?kind=snap_capi",
    )
    .await;
    // Snapchat shares the pixel id's name with Meta, and says where its own is found.
    let pixel = label_of(&snap, "pixel_id");
    assert!(!pixel.contains("Events Manager: Data sources"), "{pixel}");
    assert!(!snap.text().contains("name=\"graph_url\""));
}

#[tokio::test]
async fn a_refused_destination_keeps_what_was_typed_but_never_the_token() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let page = get_page(
        &server,
        Some(&cookie),
        "/admin/spaces/a/destinations?kind=meta_capi",
    )
    .await;
    let csrf = csrf_of(&page);
    let body = format!(
        "csrf={csrf}&kind=meta_capi&name=ads&pixel_id=12ab&access_token=EAAB-secret-token\
         &event_names=deposit%3DPurchase"
    );
    let refused = post_form(
        &server,
        Some(&cookie),
        form("/admin/spaces/a/destinations", &body),
    )
    .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    let pixel = label_of(&refused, "pixel_id");
    assert!(
        pixel.contains("value=\"12ab\"") && pixel.contains("class=\"fault\""),
        "{pixel}"
    );
    assert!(label_of(&refused, "name").contains("value=\"ads\""));
    assert!(label_of(&refused, "event_names").contains("value=\"deposit=Purchase\""));
    assert!(!refused.text().contains("EAAB-secret-token"));
    assert!(
        refused
            .text()
            .contains("<input type=\"hidden\" name=\"kind\" value=\"meta_capi\">"),
        "the kind's form stays chosen"
    );

    // A change refused: its card's form opens with what was typed and why.
    let hook = post_form(
        &server,
        Some(&cookie),
        form(
            "/admin/spaces/a/destinations",
            &format!("csrf={csrf}&kind=postback&name=net&url=https%3A%2F%2Fnet.example%2Fpb"),
        ),
    )
    .await;
    assert_eq!(hook.status, 200, "{}", hook.text());
    let changed = post_form(
        &server,
        Some(&cookie),
        form(
            "/admin/spaces/a/destinations/net/change",
            &format!("csrf={csrf}&url=ftp%3A%2F%2Fnet.example"),
        ),
    )
    .await;
    assert_eq!(changed.status, 422, "{}", changed.text());
    let text = changed.text();
    let card = &text[text.find("id=\"destination-net\"").unwrap()..];
    let card = &card[..card.find("</article>").unwrap()];
    assert!(
        card.contains("<details open>")
            && card.contains("value=\"ftp://net.example\"")
            && card.contains("class=\"fault\""),
        "{card}"
    );
}

#[tokio::test]
async fn the_settings_speak_in_words_and_a_refused_one_is_kept_beside_its_error() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/settings").await;
    let text = page.text();
    assert!(
        text.contains(
            "<option value=\"first_touch\" selected>The first click that reached the bot</option>"
        ),
        "{text}"
    );
    assert!(text.contains("<option value=\"Europe/Berlin\">Europe/Berlin</option>"));
    assert!(text.contains("<option value=\"UTC\" selected>UTC</option>"));
    assert!(!text.contains("meta_client_hints</label>") && !text.contains("\"\" removes"));
    let csrf = csrf_of(&page);
    let refused = post_form(
        &server,
        Some(&cookie),
        form(
            "/admin/spaces/a/settings",
            &format!("csrf={csrf}&attribution=last_touch&reporting_currency=US+D"),
        ),
    )
    .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    let currency = label_of(&refused, "reporting_currency");
    assert!(
        currency.contains("value=\"US D\"") && currency.contains("class=\"fault\""),
        "{currency}"
    );
    assert!(
        refused
            .text()
            .contains("<option value=\"last_touch\" selected>"),
        "the other fields as typed"
    );
    let space = server
        .send(
            &Request::get("/space").header("Authorization", format!("Bearer {}", server.a.secret)),
        )
        .await;
    assert_eq!(
        space.json()["settings"]["attribution"],
        "first_touch",
        "nothing saved"
    );
}

#[tokio::test]
async fn a_refused_days_spend_has_its_error_beside_the_amount_through_the_same_refusal() {
    let server = TestServer::start().await;
    let cookie = logged_in(&server).await;
    let page = get_page(&server, Some(&cookie), "/admin/spaces/a/costs").await;
    let csrf = csrf_of(&page);
    let body =
        format!("csrf={csrf}&day=2026-11-20&campaign_name=autumn&amount=12%2C5&currency=USD");
    let refused = post_form(
        &server,
        Some(&cookie),
        form("/admin/spaces/a/costs/day", &body),
    )
    .await;
    assert_eq!(refused.status, 422, "{}", refused.text());
    let amount = label_of(&refused, "amount");
    assert!(
        amount.contains("value=\"12,5\"") && amount.contains("class=\"fault\""),
        "{amount}"
    );
    assert!(label_of(&refused, "day").contains("value=\"2026-11-20\""));
    assert!(!label_of(&refused, "campaign_name").contains("class=\"fault\""));
}
