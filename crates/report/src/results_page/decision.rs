//! The page's decision table: need -> pick -> what you get -> what you give up -> cards for N
//! tenants.
//!
//! A minimal stand-in, built by `frontier::needs` from the like-for-like studies' comparisons
//! and capacity searches: the decision rules proper belong in `coload_analysis` /
//! `coload_report`, where the study report can use them too. When those land, replace the body
//! of [`decision_table`] (its one call site is `frontier::figures`, placeholder
//! `{{decision_table}}`) and delete [`Need`] with it.

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
    /// Tenants (workers) one card held in the measurement.
    pub(crate) tenants: u32,
    /// The card it was measured on.
    pub(crate) card: Option<String>,
}

/// Cards for `n` tenants at `per_card` a card.
fn cards_for(n: u32, per_card: u32) -> u32 {
    n.div_ceil(per_card.max(1))
}

/// The decision table (see the module's documentation: the lead swaps this for the analysis
/// crate's version).
pub(crate) fn decision_table(needs: &[Need]) -> String {
    let rows = needs
        .iter()
        .map(|n| {
            vec![
                n.what.clone(),
                format!("**{}**", n.pick),
                n.get.clone(),
                n.give.clone(),
                format!("⌈N / {}⌉: {} for 100", n.tenants, cards_for(100, n.tenants)),
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
            "cards for N tenants",
            "card",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_round_up() {
        assert_eq!(cards_for(100, 7), 15);
        assert_eq!(cards_for(70, 7), 10);
        assert_eq!(cards_for(1, 7), 1);
        assert_eq!(cards_for(5, 0), 5);
    }
}
