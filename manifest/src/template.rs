//! Task input templates and the expressions of `when` and `for_each`: the syntax check and the
//! variables each reads; and the ids of a map's item tasks.

use minijinja::Environment;

/// The variables a template may read.
pub const ROOTS: &[&str] = &["mission", "tasks", "vars", "context_summary"];

/// The variables set only inside a map (a task with `for_each`, and its item tasks): the element
/// and its position in the list.
pub const ITEM_ROOTS: &[&str] = &["item", "index"];

/// One variable a template reads, split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The whole dotted path, such as `tasks.search.output.title`.
    pub path: String,
    /// The first part: `mission`, `tasks`, `vars`, `context_summary` or an unknown name.
    pub root: String,
    /// For `tasks.X...`, the task id `X`.
    pub task: Option<String>,
    /// For `tasks.X.A...`, the attribute `A` (`output`, `status`).
    pub attribute: Option<String>,
    /// For `tasks.X.output.F...`, the field `F`.
    pub field: Option<String>,
}

/// A template minijinja cannot parse: what is wrong, and on which line of the template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{detail}{}", .line.map_or_else(String::new, |line| format!(" (line {line} of the template)")))]
#[diagnostic(code(template::syntax), help("templates use minijinja (Jinja2) syntax: `{{{{ tasks.ID.output }}}}`"))]
pub struct TemplateSyntaxError {
    /// minijinja's account of the problem.
    pub detail: String,
    /// The line of the template it is on, from 1, when minijinja knows it.
    pub line: Option<usize>,
}

/// Parses templates with one shared engine, so a large plan does not pay for a new one per task.
pub struct Templates {
    env: Environment<'static>,
}

impl Default for Templates {
    fn default() -> Self {
        Templates { env: Environment::new() }
    }
}

impl Templates {
    /// Whether a text contains template syntax at all.
    pub fn is_template(text: &str) -> bool {
        text.contains("{{") || text.contains("{%") || text.contains("{#")
    }

    /// The variables a template reads, or why it does not parse.
    pub fn references(&self, text: &str) -> Result<Vec<Reference>, TemplateSyntaxError> {
        if !Self::is_template(text) {
            return Ok(Vec::new());
        }
        if let Some(paths) = simple_references(text) {
            return Ok(paths.into_iter().map(reference).collect());
        }
        self.parsed_references(text)
    }

    /// The variables an expression (a `when`, a `for_each` written as text) reads, or why it
    /// does not parse; pass it through [`expression`] first. The error has no line: an
    /// expression is one value.
    pub fn expression_references(&self, expression: &str) -> Result<Vec<Reference>, TemplateSyntaxError> {
        let compiled = self.env.compile_expression(expression).map_err(|error| TemplateSyntaxError {
            detail: error.detail().map_or_else(|| error.kind().to_string(), str::to_owned),
            line: None,
        })?;
        let paths: std::collections::BTreeSet<String> = compiled.undeclared_variables(true).into_iter().collect();
        Ok(paths.into_iter().map(reference).collect())
    }

    /// The variables a template reads, by parsing it with minijinja.
    fn parsed_references(&self, text: &str) -> Result<Vec<Reference>, TemplateSyntaxError> {
        let template = self.env.template_from_str(text).map_err(|error| TemplateSyntaxError {
            detail: error.detail().map_or_else(|| error.kind().to_string(), str::to_owned),
            line: error.line(),
        })?;
        let paths: std::collections::BTreeSet<String> = template.undeclared_variables(true).into_iter().collect();
        Ok(paths.into_iter().map(reference).collect())
    }
}

fn reference(path: String) -> Reference {
    let mut parts = path.split('.');
    let root = parts.next().unwrap_or_default().to_owned();
    let (task, attribute, field) = if root == "tasks" {
        let task = parts.next().map(str::to_owned);
        let attribute = parts.next().map(str::to_owned);
        let field = if attribute.as_deref() == Some("output") { parts.next().map(str::to_owned) } else { None };
        (task, attribute, field)
    } else {
        (None, None, None)
    };
    Reference { path, root, task, attribute, field }
}

/// Words that are not variable names in a template.
const KEYWORDS: &[&str] =
    &["true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else"];

/// The paths read by a template made only of text and `{{ root.a.b }}` substitutions of the
/// known roots, which is what nearly every plan writes; `None` for anything else (statements,
/// filters, subscripts, other names), which minijinja then parses. Large plans have a template
/// per task, and this is many times faster than building each one.
fn simple_references(text: &str) -> Option<std::collections::BTreeSet<String>> {
    if text.contains("{%") || text.contains("{#") {
        return None;
    }
    let mut paths = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let close = after.find("}}")?;
        let expression = after[..close].trim_matches(|c: char| c == ' ' || c == '\t' || c == '\n' || c == '\r');
        let mut segments = expression.split('.');
        let root = segments.next()?;
        if !ROOTS.contains(&root) && !ITEM_ROOTS.contains(&root) {
            return None;
        }
        for segment in expression.split('.') {
            let identifier = segment.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && segment.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !identifier || KEYWORDS.contains(&segment) {
                return None;
            }
        }
        paths.insert(expression.to_owned());
        rest = &after[close + 2..];
    }
    Some(paths)
}

/// The expression of a `when` or of a `for_each` written as text: the text itself, or what a
/// `{{ ... }}` around the whole of it holds, since authors write both.
pub fn expression(text: &str) -> &str {
    let trimmed = text.trim();
    match trimmed.strip_prefix("{{").and_then(|rest| rest.strip_suffix("}}")) {
        Some(inner) if !inner.contains("{{") && !inner.contains("}}") => inner.trim(),
        _ => trimmed,
    }
}

/// The id of item `index` of map task `map`: `search[2]`.
pub fn item_id(map: &str, index: usize) -> String {
    format!("{map}[{index}]")
}

/// The id of the map task an item task's id names: `search` for `search[2]`; `None` for an id
/// that does not end in digits in brackets, which is every id a manifest may write.
pub fn map_of_item(id: &str) -> Option<&str> {
    let (map, position) = id.strip_suffix(']')?.rsplit_once('[')?;
    (!position.is_empty() && position.bytes().all(|b| b.is_ascii_digit())).then_some(map)
}

/// The template expression for a task's output: `tasks.ID.output`, or `tasks["ID"].output`
/// when the id is not an identifier.
pub fn output_of(id: &str) -> String {
    OutputOf(id).to_string()
}

/// [`output_of`] as it is written into a longer text, without a text of its own.
pub struct OutputOf<'a>(pub &'a str);

impl std::fmt::Display for OutputOf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = self.0;
        let identifier = id.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if identifier { write!(f, "tasks.{id}.output") } else { write!(f, "tasks[{id:?}].output") }
    }
}

/// Rewrites the bare form's `results.X` inside `{{ }}` and `{% %}` to `tasks.X.output`;
/// `None` when there is nothing to rewrite.
pub fn rewrite_results(text: &str) -> Option<String> {
    if !text.contains("results") {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    let mut changed = false;
    while let Some(open) = rest.find("{{").or_else(|| rest.find("{%")).map(|i| {
        let j = rest.find("{%").unwrap_or(usize::MAX);
        i.min(j)
    }) {
        let close_token = if rest[open..].starts_with("{{") { "}}" } else { "%}" };
        let Some(close) = rest[open..].find(close_token).map(|c| open + c) else { break };
        out.push_str(&rest[..open]);
        let expression = &rest[open..close];
        let rewritten = rewrite_expression(expression);
        changed |= rewritten != expression;
        out.push_str(&rewritten);
        rest = &rest[close..];
        let token_end = close_token.len();
        out.push_str(&rest[..token_end]);
        rest = &rest[token_end..];
    }
    out.push_str(rest);
    changed.then_some(out)
}

fn rewrite_expression(expression: &str) -> String {
    let mut out = String::with_capacity(expression.len() + 16);
    let bytes = expression.as_bytes();
    let mut i = 0;
    while i < expression.len() {
        let at_word_start = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b'.';
        if at_word_start && expression[i..].starts_with("results.") {
            let id_start = i + "results.".len();
            let id_end = expression[id_start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(expression.len(), |n| id_start + n);
            if id_end > id_start {
                out.push_str("tasks.");
                out.push_str(&expression[id_start..id_end]);
                out.push_str(".output");
                i = id_end;
                continue;
            }
        }
        let ch = expression[i..].chars().next().unwrap_or_default();
        out.push(ch);
        i += ch.len_utf8().max(1);
    }
    out
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::Strategy;

    #[test]
    fn results_become_task_outputs_inside_expressions_only() {
        assert_eq!(
            rewrite_results("Use results.a: {{results.a}} and {{ results.b.capital }}").as_deref(),
            Some("Use results.a: {{tasks.a.output}} and {{ tasks.b.output.capital }}")
        );
        assert_eq!(rewrite_results("{{ my_results.a }}"), None);
        assert_eq!(rewrite_results("no templates"), None);
    }

    #[test]
    fn references_split_task_and_field() {
        let refs = Templates::default()
            .references("{{ mission }} {{ tasks.a.output.title }} {{ tasks.b.status }} {% for x in vars.items %}{{ x }}{% endfor %}")
            .unwrap();
        let paths: Vec<_> = refs.iter().map(|r| (r.root.as_str(), r.task.as_deref(), r.field.as_deref())).collect();
        assert!(paths.contains(&("mission", None, None)), "{paths:?}");
        assert!(paths.contains(&("tasks", Some("a"), Some("title"))), "{paths:?}");
        assert!(paths.contains(&("tasks", Some("b"), None)), "{paths:?}");
        assert!(paths.iter().any(|p| p.0 == "vars"), "{paths:?}");
        assert!(!paths.iter().any(|p| p.0 == "x"), "{paths:?}");
    }

    proptest::proptest! {
        /// The hand reader agrees with minijinja on every template it takes on.
        #[test]
        fn simple_references_agree_with_minijinja(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    "[a-z ,.:!?()\\n{}-]{0,12}".prop_map(|t| t.replace("{{", "{").replace("}}", "}")),
                    (
                        proptest::sample::select(vec![
                            "mission", "tasks", "vars", "context_summary", "item", "index", "range", "true", "x",
                        ]),
                        proptest::collection::vec("[a-z_][a-z0-9_]{0,5}|if|true|1x", 0..4),
                        "[ \t\n]{0,2}",
                        "[ \t\n]{0,2}",
                    )
                        .prop_map(|(root, segments, before, after)| {
                            let mut path = root.to_owned();
                            for segment in segments {
                                path.push('.');
                                path.push_str(&segment);
                            }
                            format!("{{{{{before}{path}{after}}}}}")
                        }),
                ],
                0..6,
            )
        ) {
            let text: String = parts.concat();
            let templates = Templates::default();
            if let Some(paths) = simple_references(&text) {
                let fast: Vec<Reference> = paths.into_iter().map(reference).collect();
                let parsed = templates.parsed_references(&text);
                proptest::prop_assert_eq!(Ok(fast), parsed, "{}", text);
            }
        }
    }

    #[test]
    fn the_hand_reader_declines_what_it_does_not_know() {
        for text in [
            "{{ tasks.a.output | upper }}",
            "{% if x %}{% endif %}",
            "{{ tasks['a-b'].output }}",
            "{{ foo }}",
            "{{ true }}",
            "{{- mission -}}",
            "{{ mission",
        ] {
            assert_eq!(simple_references(text), None, "{text}");
        }
        let paths = simple_references("A {{ mission }} and {{tasks.a.output.title}} {{ vars.x }}").unwrap();
        assert_eq!(paths.into_iter().collect::<Vec<_>>(), ["mission", "tasks.a.output.title", "vars.x"]);
    }

    #[test]
    fn expressions_are_compiled_and_their_reads_listed() {
        let templates = Templates::default();
        let refs = templates
            .expression_references(expression("{{ tasks.triage.output.kind == 'web' and vars.deep }}"))
            .unwrap();
        let paths: Vec<&str> = refs.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["tasks.triage.output.kind", "vars.deep"]);
        assert_eq!(refs[0].task.as_deref(), Some("triage"));
        let error = templates.expression_references("tasks.a.output ==").unwrap_err();
        assert_eq!(error.line, None);
        assert!(templates.expression_references("").is_err());
    }

    #[test]
    fn item_ids_name_their_map_and_position() {
        assert_eq!(map_of_item("search[12]"), Some("search"));
        assert_eq!(map_of_item("a[0][3]"), Some("a[0]"));
        for id in ["search", "search[]", "search[x]", "search[1", "search1]", "[-1]"] {
            assert_eq!(map_of_item(id), None, "{id}");
        }
    }

    #[test]
    fn syntax_errors_say_where() {
        let error = Templates::default().references("line one\n{{ tasks.a.output ").unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
    }
}
