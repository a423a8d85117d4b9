//! The page's decision table: need -> pick -> what you get -> what you give up -> cards for N
//! tenants.
//!
//! One table over several studies, built by `frontier::needs`: serving beside training comes
//! from each frontier study's own decision table (`coload_analysis::frontier::decision`, the
//! rule the study report opens with), the card-full, tail and energy needs from the decision
//! rows. Its one call site is `frontier::figures` (placeholder `{{decision_table}}`).

use super::table;

/// One need and the policy the data pick for it.
pub(crate) struct Need {
    /// What a reader needs, in words (`training throughput, card full`).
    pub(crate) what: String,
    /// The policy picked, as the page names it.
    pub(crate) pick: String,
    /// What it gets, with the figure and its interval.
    pub(crate) get: String,
    /// What it gives up, with the figure and its interval.
    pub(crate) give: String,
    /// Cards for the mix's tenants, in words (`1 card for 7`).
    pub(crate) cards: String,
    /// The card it was measured on.
    pub(crate) card: Option<String>,
}

/// The decision table of the page.
pub(crate) fn decision_table(needs: &[Need]) -> String {
    let rows = needs
        .iter()
        .map(|n| {
            vec![
                n.what.clone(),
                format!("**{}**", n.pick),
                n.get.clone(),
                n.give.clone(),
                n.cards.clone(),
                n.card.as_deref().map_or_else(
                    || "-".to_owned(),
                    |c| coload_analysis::short_card(c).to_owned(),
                ),
            ]
        })
        .collect();
    table(
        &[
            "need",
            "pick",
            "what you get",
            "what you give up",
            "cards for the tenants",
            "card",
        ],
        rows,
    )
}
