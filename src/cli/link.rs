//! The answers of `tracker link ...` as text: a new link's address for the ads, the list of a
//! space's links with where each goes and its clicks (a channel link's invite links and joins
//! on a line of their own), a deletion.

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
