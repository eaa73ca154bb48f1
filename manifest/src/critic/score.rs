//! Scores: 0-10 per dimension and overall, by a formula a reader can redo by hand.
//!
//! A dimension starts at 10 and loses 2 per warning and 0.5 per note in it, down to 0. The
//! overall score is the mean of the five dimensions, less 0.5 per warning and 0.1 per note
//! outside them, clamped to 0-10. Scores are rounded to one decimal. A plan with validation
//! errors cannot run and scores 0.

use crate::diagnostic::Severity;

use super::finding::Dimension;

/// What one warning costs its dimension.
pub const WARNING_COST: f64 = 2.0;
/// What one note costs its dimension.
pub const INFO_COST: f64 = 0.5;
/// What one warning outside the dimensions costs the overall score.
pub const GENERAL_WARNING_COST: f64 = 0.5;
/// What one note outside the dimensions costs the overall score.
pub const GENERAL_INFO_COST: f64 = 0.1;

/// The scores of a plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scores {
    /// Each dimension's score, in [`Dimension::ALL`] order.
    pub dimensions: [f64; 5],
    /// The overall score.
    pub overall: f64,
}

impl Scores {
    /// All zero: the plan cannot run.
    pub fn zero() -> Self {
        Scores { dimensions: [0.0; 5], overall: 0.0 }
    }

    /// The score of one dimension.
    pub fn of_dimension(&self, dimension: Dimension) -> f64 {
        let index = Dimension::ALL.iter().position(|d| *d == dimension).unwrap_or_default();
        self.dimensions[index]
    }

    /// Applies the formula to the dimension and severity of each finding, in order.
    pub(crate) fn of(findings: impl Iterator<Item = (Option<Dimension>, Severity)>) -> Self {
        let cost = |severity: Severity, warning: f64, info: f64| match severity {
            Severity::Warning | Severity::Error => warning,
            Severity::Info => info,
        };
        let mut dimensions = [10.0; 5];
        let mut general = 0.0;
        for (dimension, severity) in findings {
            match dimension {
                Some(dimension) => {
                    let index = Dimension::ALL.iter().position(|d| *d == dimension).unwrap_or_default();
                    dimensions[index] -= cost(severity, WARNING_COST, INFO_COST);
                }
                None => general += cost(severity, GENERAL_WARNING_COST, GENERAL_INFO_COST),
            }
        }
        for score in &mut dimensions {
            *score = round1(score.max(0.0));
        }
        let mean = dimensions.iter().sum::<f64>() / dimensions.len() as f64;
        Scores { dimensions, overall: round1((mean - general).clamp(0.0, 10.0)) }
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
