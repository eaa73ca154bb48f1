//! The critic's findings on a plan's `control_logic.budget`, from its forecast.

use manifest::critic::{Finding, Lint};
use manifest::plan::Plan;

use super::Forecast;
use super::shown::{duration, money, no_cost};

/// The critic's findings on the plan's `control_logic.budget`: a warning when an expected
/// figure passes it, an error when a run within the plan's limits can pass it and nothing stops
/// it there. A cost has a stop when every provider asked has a price in one currency (the run
/// counts its spend and stops dispatching once it passes `cost`); a duration has none.
pub fn findings(plan: &Plan, forecast: &Forecast) -> Vec<Finding> {
    let Some(budget) = &plan.control.budget else { return Vec::new() };
    let mut found = Vec::new();
    let mut report = |lint: Lint, error: bool| {
        let finding = if error {
            Finding::error(lint, None, &budget.loc).help(
                "bound the run (a `timeout` on each agent, a `context_window` and a `price` on each provider, fewer attempts) or raise the budget",
            )
        } else {
            Finding::warning(lint, None, &budget.loc)
                .help("raise the budget, or make the plan cheaper or quicker: `runner forecast PLAN` shows each task's figures")
        };
        found.push(finding.label("the budget"));
    };
    if let Some(limit) = budget.value.cost {
        let asks_a_model = forecast.run.tokens.worst != Some(0) || forecast.run.tokens.expected > 0;
        match &forecast.run.cost {
            Some(cost) if cost.amount.expected > limit => report(
                Lint::OverBudget {
                    what: "cost",
                    expected: money(cost.amount.expected, &cost.currency),
                    budget: money(limit, &cost.currency),
                },
                false,
            ),
            Some(_) => {}
            None if !asks_a_model => {}
            None => report(
                Lint::BudgetNotKept {
                    what: "cost",
                    worst: format!("{}, so the run cannot count its spend", no_cost(forecast)),
                    budget: format!("{limit}"),
                },
                true,
            ),
        }
    }
    if let Some(limit) = budget.value.duration {
        let limit_ms = limit.as_millis();
        let span = &forecast.run.duration_ms;
        let worst = match span.worst {
            Some(worst) if worst <= limit_ms => None,
            Some(worst) => Some(format!("{} at worst", duration(worst))),
            None => Some(format!("an unbounded time ({})", unbounded_why(forecast))),
        };
        match worst {
            Some(worst) => report(Lint::BudgetNotKept { what: "duration", worst, budget: duration(limit_ms) }, true),
            None if span.expected > limit_ms => report(
                Lint::OverBudget { what: "duration", expected: duration(span.expected), budget: duration(limit_ms) },
                false,
            ),
            None => {}
        }
    }
    found
}

/// The first reason the forecast gives for an unbounded worst case.
fn unbounded_why(forecast: &Forecast) -> &str {
    forecast.unbounded.first().map_or("no limit bounds it", String::as_str)
}
