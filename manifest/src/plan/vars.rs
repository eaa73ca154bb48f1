//! A run's variables: the plan's declared defaults (`spec.vars`) overlaid with the values a
//! person or a plan test gives. Every command that starts a run takes its vars from
//! [`Plan::run_vars`], so `apply` and `runner test` cannot disagree about them.

use miette::Diagnostic;
use thiserror::Error;

use super::{Plan, Vars};
use crate::diagnostic::did_you_mean;

/// A value given for a variable the plan does not declare, when it declares some: a typo that
/// would otherwise leave the default in force without a word.
#[derive(Debug, Clone, PartialEq, Eq, Error, Diagnostic)]
#[error("the plan `{plan}` declares no variable `{name}`")]
#[diagnostic(code(cli::undeclared_var), help("{}", self.help()))]
pub struct UndeclaredVar {
    /// The plan's name.
    pub plan: String,
    /// The name as given.
    pub name: String,
    /// The names `spec.vars` declares, in order.
    pub declared: Vec<String>,
}

impl UndeclaredVar {
    /// "did you mean `x`?" when a declared name is close, then the declared names.
    pub fn help(&self) -> String {
        let declared = match self.declared.is_empty() {
            true => "its `spec.vars` declares none".to_owned(),
            false => {
                let names: Vec<String> = self.declared.iter().map(|n| format!("`{n}`")).collect();
                format!("its variables: {}", names.join(", "))
            }
        };
        match did_you_mean(&self.name, self.declared.iter().map(String::as_str)) {
            Some(suggestion) => format!("{suggestion} {declared}"),
            None => declared,
        }
    }
}

impl Plan {
    /// The vars a run of this plan starts with: the declared defaults, each overridden by the
    /// value `given` for it (the last one wins when a name is given twice). When the plan
    /// declares `spec.vars`, a name it does not declare is an error; a plan that declares none
    /// takes any name, as plans did before `spec.vars`.
    pub fn run_vars(
        &self,
        given: impl IntoIterator<Item = (String, serde_json::Value)>,
    ) -> Result<Vars, UndeclaredVar> {
        let mut vars = self.vars.clone().unwrap_or_default();
        for (name, value) in given {
            if let Some(declared) = &self.vars
                && !declared.contains_key(&name)
            {
                let declared = declared.keys().cloned().collect();
                return Err(UndeclaredVar { plan: self.name.clone(), name, declared });
            }
            vars.insert(name, value);
        }
        Ok(vars)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plan(vars: Option<serde_json::Value>) -> Plan {
        let vars = vars.map(|v| serde_json::from_value(v).expect("a map"));
        Plan { name: "p".into(), vars, ..Plan::default() }
    }

    fn given(pairs: &[(&str, serde_json::Value)]) -> Vec<(String, serde_json::Value)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
    }

    #[test]
    fn defaults_hold_until_a_value_is_given() {
        let plan = plan(Some(json!({"audience": "investors", "topics": ["a", "b"]})));
        let vars = plan.run_vars(given(&[("topics", json!(["c"]))])).expect("declared");
        assert_eq!(serde_json::to_value(vars).expect("json"), json!({"audience": "investors", "topics": ["c"]}));
    }

    #[test]
    fn an_undeclared_name_is_refused_with_a_suggestion_and_the_declared_names() {
        let plan = plan(Some(json!({"audience": "investors", "topics": []})));
        let error = plan.run_vars(given(&[("audiense", json!("x"))])).expect_err("undeclared");
        assert_eq!(error.name, "audiense");
        assert_eq!(error.help(), "did you mean `audience`? its variables: `audience`, `topics`");
        let error = plan.run_vars(given(&[("zzz", json!(1))])).expect_err("undeclared");
        assert_eq!(error.help(), "its variables: `audience`, `topics`");
    }

    #[test]
    fn an_empty_declaration_takes_no_names() {
        let error = plan(Some(json!({}))).run_vars(given(&[("a", json!(1))])).expect_err("none declared");
        assert_eq!(error.help(), "its `spec.vars` declares none");
    }

    #[test]
    fn a_plan_without_declarations_takes_any_name() {
        let vars = plan(None).run_vars(given(&[("a", json!("1")), ("a", json!(2))])).expect("any name");
        assert_eq!(serde_json::to_value(vars).expect("json"), json!({"a": 2}));
    }
}
