//! The answers of `tracker link ...` as text: a new link's address for the ads, the list of a
//! space's links with where each goes and its clicks (a channel link's invite links and joins,
//! and a landing page's views and line to paste, on lines of their own), a deletion.

use std::fmt::Write as _;

use super::output;
use crate::control::LinkDeleted;
use crate::domain::display;
use crate::domain::link::LinkView;

pub(super) fn created_text(link: &LinkView) -> String {
    let mut text = format!(
        "created link {}: put this address in your ads\n  {}",
        link.slug, link.url
    );
    if let Some(warning) = link.channel_state.as_ref().and_then(|c| c.warning.as_ref()) {
        let _ = write!(text, "\nnote: {warning}");
    }
    text
}

/// A line per link: its slug, mode, clicks, where it goes and its public address.
pub(super) fn list_text(links: &[LinkView]) -> String {
    let none = "no links yet: tracker link create SPACE SLUG --bot NAME";
    output::list_text(links, none, |text, l| {
        let _ = writeln!(
            text,
            "{:<20} {:<8} {} clicks, {} bound  -> {}  {}",
            l.slug,
            l.mode,
            l.clicks,
            l.bound_clicks,
            display::goes_to(l),
            l.url
        );
        if !l.allowed_origins.is_empty() {
            let _ = writeln!(
                text,
                "{:<20} landing pages: {} views from {}; paste {}",
                "",
                l.views,
                l.allowed_origins.join(", "),
                l.script_line()
            );
        }
        if let Some(c) = &l.channel_state {
            let _ = writeln!(
                text,
                "{:<20} invite links: {} ready, {} handed out, {} used, {} visits to the \
                 fallback; {} joins, {} leaves{}",
                "",
                c.pool,
                c.handed_out,
                c.used,
                c.fallbacks,
                c.joins,
                c.leaves,
                c.last_error
                    .as_ref()
                    .map_or_else(String::new, |e| format!("; Bot API: {e}"))
            );
            if let Some(warning) = &c.warning {
                let _ = writeln!(text, "{:<20} note: {warning}", "");
            }
        }
    })
}

pub(super) fn deleted_text(d: &LinkDeleted) -> String {
    format!(
        "deleted link {} of space {}: its address now answers 410 Gone",
        d.slug, d.space
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_with_landing_pages_shows_its_views_and_the_line_to_paste() {
        let mut link: LinkView = serde_json::from_value(serde_json::json!({
            "slug": "spring", "bot": "shop_bot", "campaign_name": null, "mode": "redirect",
            "url": "https://t.example.com/l/spring", "created_at_ms": 0, "clicks": 4,
            "bound_clicks": 1,
        }))
        .unwrap();
        assert!(!list_text(std::slice::from_ref(&link)).contains("landing pages"));
        link.allowed_origins = vec!["https://land.example.com".into()];
        link.views = 12;
        let text = list_text(&[link]);
        assert!(
            text.contains(
                "landing pages: 12 views from https://land.example.com; paste <script \
                 src=\"https://t.example.com/t.js\" data-link=\"spring\" defer></script>"
            ),
            "{text}"
        );
    }
}
