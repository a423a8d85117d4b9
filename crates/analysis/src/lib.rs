//! Cohort validation, statistics, comparisons and reports.
