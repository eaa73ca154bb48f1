//! Every problem the loader and validator can report: its stable code, its message, and the
//! label and help a diagnostic shows unless its call site knows better.

/// Every problem a manifest can have. The `code` of each variant is stable: tools match on it.
#[derive(Debug, Clone, PartialEq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum Problem {
    /// The file could not be read.
    #[error("cannot read the plan: {reason}")]
    #[diagnostic(code(plan::io))]
    Io {
        /// The operating system's reason.
        reason: String,
    },
    /// The file is larger than the loader accepts.
    #[error("the plan is {size} bytes; plans are limited to {limit} bytes")]
    #[diagnostic(
        code(plan::too_large),
        help("split the plan, or raise the limit with RUNNER_MAX_PLAN_BYTES (bytes, or e.g. `128MiB`; at most 4 GiB)")
    )]
    TooLarge {
        /// The file's size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    #[error("the plan is not UTF-8 text (invalid byte at offset {offset})")]
    #[diagnostic(code(plan::not_utf8), help("save the file as UTF-8"))]
    NotUtf8 {
        /// The offset of the first invalid byte.
        offset: usize,
    },
    /// The YAML reader rejected the text.
    #[error("invalid YAML: {message}")]
    #[diagnostic(code(plan::yaml_syntax), help("check the indentation and quoting around this point"))]
    YamlSyntax {
        /// The reader's explanation.
        message: String,
    },
    /// A plan written as JSON (its first character is `{`) is not valid JSON.
    #[error("invalid JSON: {message}")]
    #[diagnostic(code(plan::json_syntax), help("check the commas, quotes and brackets around this point"))]
    JsonSyntax {
        /// The reader's explanation.
        message: String,
    },
    /// The text is over one of the reader's limits (nesting, aliases, size), which keep a
    /// hostile file from exhausting memory or the stack.
    #[error("the plan {what}")]
    #[diagnostic(code(plan::over_limit))]
    OverLimit {
        /// Which limit, with its value: "nests deeper than 64 levels".
        what: String,
    },
    /// A value has the wrong type.
    #[error("{what} must be {expected}, found {found}")]
    #[diagnostic(code(plan::wrong_type), help("write {expected} here"))]
    WrongType {
        /// The field or item.
        what: String,
        /// The expected kind.
        expected: String,
        /// The kind found.
        found: &'static str,
    },
    /// A field that this place does not have.
    #[error("unknown field `{field}` in {context}")]
    #[diagnostic(code(plan::unknown_field))]
    UnknownField {
        /// The field as written.
        field: String,
        /// Where it was found (`a task`, `spec`, ...).
        context: String,
    },
    /// A required field is absent.
    #[error("{context} has no `{field}`")]
    #[diagnostic(code(plan::missing_field), help("add `{field}` to {context}"))]
    MissingField {
        /// The missing field.
        field: String,
        /// Where it is missing.
        context: String,
    },
    /// A value of the right type that is not allowed.
    #[error("invalid {what}: {reason}")]
    #[diagnostic(code(plan::invalid_value))]
    InvalidValue {
        /// The field or item.
        what: String,
        /// Why it is invalid.
        reason: String,
    },
    /// `apiVersion` or `kind` is not one this loader reads.
    #[error("unsupported {field} `{found}`; this runner reads `{expected}`")]
    #[diagnostic(code(plan::unsupported_version), help("write `{field}: {expected}`"))]
    UnsupportedVersion {
        /// `apiVersion` or `kind`.
        field: &'static str,
        /// The value found.
        found: String,
        /// The value expected.
        expected: &'static str,
    },
    /// Two tasks share an id.
    #[error("duplicate task id `{id}`")]
    #[diagnostic(code(plan::duplicate_task), help("give each task its own id"))]
    DuplicateTask {
        /// The id.
        id: String,
    },
    /// A dependency names no task.
    #[error("task `{task}` depends on unknown task `{dependency}`")]
    #[diagnostic(code(plan::unknown_dependency))]
    UnknownDependency {
        /// The dependent task.
        task: String,
        /// The missing task.
        dependency: String,
    },
    /// A task depends on itself.
    #[error("task `{task}` depends on itself")]
    #[diagnostic(code(plan::self_dependency), help("remove this dependency"))]
    SelfDependency {
        /// The task.
        task: String,
    },
    /// Tasks depend on each other in a circle.
    #[error("dependency cycle between {}", members.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "))]
    #[diagnostic(code(plan::cycle), help("remove one of the labelled dependencies to break the cycle"))]
    Cycle {
        /// Every task in the strongly connected component, in workflow order.
        members: Vec<String>,
    },
    /// A synthesis gate reads a task that does not exist.
    #[error("synthesis gate `{gate}` reads unknown task `{input}`")]
    #[diagnostic(code(plan::unknown_gate_input))]
    UnknownGateInput {
        /// The gate.
        gate: String,
        /// The missing task.
        input: String,
    },
    /// A reference to an agent that is not defined.
    #[error("{owner} uses unknown agent `{agent}`")]
    #[diagnostic(code(plan::unknown_agent))]
    UnknownAgent {
        /// Who refers to it (`task `x``, `control_logic.planner`).
        owner: String,
        /// The agent name.
        agent: String,
    },
    /// A reference to a tool that is not defined.
    #[error("agent `{agent}` uses unknown tool `{tool}`")]
    #[diagnostic(code(plan::unknown_tool))]
    UnknownTool {
        /// The agent.
        agent: String,
        /// The tool name.
        tool: String,
    },
    /// A reference to a provider that is not defined.
    #[error("agent `{agent}` uses unknown provider `{provider}`")]
    #[diagnostic(code(plan::unknown_provider))]
    UnknownProvider {
        /// The agent.
        agent: String,
        /// The provider name.
        provider: String,
    },
    /// A template does not parse.
    #[error("template error in {owner}: {detail}")]
    #[diagnostic(
        code(plan::template_syntax),
        help("templates use minijinja (Jinja2) syntax: `{{{{ tasks.ID.output }}}}`")
    )]
    TemplateSyntax {
        /// Whose template.
        owner: String,
        /// The template engine's explanation.
        detail: String,
    },
    /// A template reads a variable that will not exist when it is rendered.
    #[error("{owner} reads `{variable}`, which is not defined")]
    #[diagnostic(code(plan::template_unknown_variable))]
    TemplateUnknownVariable {
        /// Whose template.
        owner: String,
        /// The variable.
        variable: String,
    },
    /// A template reads the output of a task that does not run before it.
    #[error("task `{task}` reads `tasks.{read}`, but `{read}` is not upstream of `{task}`")]
    #[diagnostic(code(plan::template_not_ancestor), help("add `{read}` to `depends_on` of `{task}`"))]
    TemplateNotAncestor {
        /// The reading task.
        task: String,
        /// The task it reads.
        read: String,
    },
    /// A `when`, or a `for_each` written as text, does not parse as an expression.
    #[error("expression error in {owner}: {detail}")]
    #[diagnostic(
        code(plan::expression_syntax),
        help("write one minijinja (Jinja2) expression, such as `tasks.triage.output.kind == \"web\"`")
    )]
    ExpressionSyntax {
        /// Whose expression.
        owner: String,
        /// The template engine's explanation.
        detail: String,
    },
    /// A template or expression reads `item` or `index` outside a map.
    #[error("{owner} reads `{variable}`, which is only set inside a map (a task with `for_each`)")]
    #[diagnostic(
        code(plan::item_outside_map),
        help(
            "give the task a `for_each` list, or read something else; `item` and `index` are the element and its position"
        )
    )]
    ItemOutsideMap {
        /// Whose template or expression.
        owner: String,
        /// `item` or `index`, with what follows it.
        variable: String,
    },
    /// A template or expression reads a variable the plan's `spec.vars` does not declare.
    #[error("{owner} reads `vars.{name}`, which `spec.vars` does not declare")]
    #[diagnostic(code(plan::undeclared_var), help("declare it with a default under `spec.vars`: `{name}: ...`"))]
    UndeclaredVar {
        /// Whose template or expression.
        owner: String,
        /// The variable's name.
        name: String,
    },
    /// A `for_each` expression that reads run-time data, on a task with no `max_items`.
    #[error("task `{task}` maps over a list from run-time data, which needs `max_items`")]
    #[diagnostic(
        code(plan::unbounded_map),
        help("add `max_items: N` to task `{task}`: a list of more than N items fails the task")
    )]
    UnboundedMap {
        /// The map task.
        task: String,
    },
    /// A `for_each` list written in the plan that is longer than the task's `max_items`.
    #[error("task `{task}` maps over {items} items, more than its `max_items` of {max}")]
    #[diagnostic(code(plan::too_many_items), help("raise `max_items` to at least {items}, or shorten the list"))]
    TooManyItems {
        /// The map task.
        task: String,
        /// How many items the list has.
        items: usize,
        /// The task's `max_items`.
        max: u32,
    },
    /// `skip` would let a critical task be skipped.
    #[error("critical task `{task}` can be skipped")]
    #[diagnostic(
        code(plan::skip_on_critical),
        help("a critical task must succeed: use `retry` or `replan`, or drop `critical: true`")
    )]
    SkipOnCritical {
        /// The task.
        task: String,
    },
    /// `replan` with no planner agent to ask.
    #[error("task `{task}` replans on failure, but `control_logic.planner` names no agent")]
    #[diagnostic(
        code(plan::replan_without_planner),
        help("name the agent that writes replacement tasks in `control_logic.planner`")
    )]
    ReplanWithoutPlanner {
        /// The task.
        task: String,
    },
    /// `replan` on a map: a replan replaces a task and its descendants, and a map's items are
    /// neither.
    #[error("map task `{task}` replans on failure, which its items cannot do")]
    #[diagnostic(
        code(plan::replan_in_map),
        help("give the map `retry` or `skip` (each item follows it), and replan a task after the map instead")
    )]
    ReplanInMap {
        /// The map task.
        task: String,
    },
    /// A field that only one type of task reads, on a task of another type.
    #[error("`{field}` belongs to a `type: {kind}` task, and task `{task}` is not one")]
    #[diagnostic(code(plan::wrong_task_type), help("set `type: {kind}` on the task, or remove `{field}`"))]
    WrongTaskType {
        /// The task.
        task: String,
        /// The field.
        field: String,
        /// The type that reads it.
        kind: String,
    },
    /// A sub-plan file that cannot be read.
    #[error("cannot read the sub-plan `{path}` of task `{task}`: {reason}")]
    #[diagnostic(
        code(plan::subplan_missing),
        help("`plan:` is a path relative to the folder of the plan that names it")
    )]
    SubPlanMissing {
        /// The task.
        task: String,
        /// The path as written.
        path: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// A sub-plan file with errors of its own (reported in that file, at their lines).
    #[error("the sub-plan `{path}` of task `{task}` has {errors} error(s)")]
    #[diagnostic(
        code(plan::subplan_invalid),
        help("fix the errors reported in `{path}`; they are listed with this one")
    )]
    SubPlanInvalid {
        /// The task.
        task: String,
        /// The path as written.
        path: String,
        /// How many errors it has.
        errors: usize,
    },
    /// A `with` key that the sub-plan does not declare under `spec.vars`.
    #[error("task `{task}` gives the sub-plan `{path}` the variable `{name}`, which it does not declare")]
    #[diagnostic(code(plan::subplan_var))]
    SubPlanVar {
        /// The task.
        task: String,
        /// The sub-plan's path as written.
        path: String,
        /// The key of `with`.
        name: String,
        /// The variables the sub-plan declares, in order.
        declared: Vec<String>,
    },
    /// Sub-plans that include each other, directly or through others.
    #[error("sub-plans include each other: {}", chain.join(" -> "))]
    #[diagnostic(
        code(plan::subplan_cycle),
        help("a plan cannot run itself as a sub-plan, however far down: break the chain at one of these files")
    )]
    SubPlanCycle {
        /// Every file of the cycle, in order, the first again at the end.
        chain: Vec<String>,
    },
    /// Sub-plans nested deeper than the loader follows.
    #[error("sub-plans nested more than {most} files deep: {}", chain.join(" -> "))]
    #[diagnostic(
        code(plan::subplan_too_deep),
        help("flatten the chain: a sub-plan can hold the steps of the files it runs instead of running them")
    )]
    SubPlanTooDeep {
        /// The files from the plan loaded first down to the one refused.
        chain: Vec<String>,
        /// How deep sub-plans may nest.
        most: usize,
    },
    /// A verification or tool schema that is not a valid JSON Schema.
    #[error("invalid JSON Schema in {owner}: {detail}")]
    #[diagnostic(code(plan::invalid_schema), help("see https://json-schema.org for the keywords a schema may use"))]
    InvalidSchema {
        /// Whose schema.
        owner: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A `file` attachment that does not exist.
    #[error("task `{task}` attaches `{file}`, which does not exist")]
    #[diagnostic(code(plan::missing_attachment), help("file attachments are read relative to the plan's folder"))]
    MissingAttachment {
        /// The task.
        task: String,
        /// The file as written.
        file: String,
    },
    /// A workflow with no tasks.
    #[error("the workflow has no tasks")]
    #[diagnostic(code(plan::empty_workflow), help("add at least one task with an `id`, an `agent` and an `input`"))]
    EmptyWorkflow,
    /// An `api_key_env` that holds what looks like a key rather than a variable name.
    #[error("provider `{provider}` has a literal API key in `api_key_env`")]
    #[diagnostic(
        code(plan::literal_api_key),
        help("put the key in an environment variable and write its name, e.g. `api_key_env: OPENAI_API_KEY`")
    )]
    LiteralApiKey {
        /// The provider.
        provider: String,
    },
    /// An `http` agent's `api_key_env` or `headers_env` value that is not a variable name, or
    /// credentials written into its `url`.
    #[error("agent `{agent}` has a literal secret in `{field}`")]
    #[diagnostic(code(plan::literal_secret))]
    LiteralSecret {
        /// The agent.
        agent: String,
        /// `api_key_env`, `headers_env` or `url`.
        field: String,
    },
    /// A field or value from the bare seed form read under its canonical name.
    #[error("`{written}` read as `{canonical}`")]
    #[diagnostic(code(plan::alias))]
    Alias {
        /// What the plan says.
        written: String,
        /// What it means here.
        canonical: String,
    },
    /// A bare-form task that reads no upstream output gets its dependencies' outputs.
    #[error("task `{task}` reads no upstream output, so its dependencies' outputs are appended to its input")]
    #[diagnostic(code(plan::implicit_inputs))]
    ImplicitInputs {
        /// The task.
        task: String,
    },
    /// Something from another planner that has no equivalent here.
    #[error("{what} is not supported and is ignored")]
    #[diagnostic(code(plan::unsupported))]
    Unsupported {
        /// The construct.
        what: String,
    },
    /// A planner's replacement for failed tasks holds no workflow that can be read.
    #[error("the planner's answer is not a JSON workflow: {message}")]
    #[diagnostic(
        code(plan::replacement_not_json),
        help("answer with one JSON object, `{{\"workflow\": [{{\"id\": ..., \"agent\": ..., \"input\": ...}}]}}`")
    )]
    ReplacementNotJson {
        /// Why it could not be read.
        message: String,
    },
    /// A plan test's override or expectation names an agent, task or tool the plan lacks.
    #[error("plan `{plan}` has no {what} `{name}`")]
    #[diagnostic(code(test::unknown_target))]
    UnknownTarget {
        /// `agent`, `task`, `tool` or `variable`.
        what: &'static str,
        /// The name as written.
        name: String,
        /// The plan's name.
        plan: String,
    },
    /// A plan test's critic expectation names a finding code the critic does not have.
    #[error("the critic has no finding `{code}`")]
    #[diagnostic(code(test::unknown_finding), help("docs/critic.md lists every finding code"))]
    UnknownFinding {
        /// The code as written.
        code: String,
    },
    /// The plan a plan test runs cannot be loaded, or has errors.
    #[error("the plan under test, {path}, has {errors} error(s)")]
    #[diagnostic(code(test::plan_invalid), help("run `runner validate {path}` and fix the plan first"))]
    PlanInvalid {
        /// The plan's path as the test file gives it.
        path: String,
        /// How many errors it has.
        errors: usize,
    },
    /// A plan test's request could not be planned: the model's server failed in a way the
    /// planner cannot fall back from, or the model asked questions instead.
    #[error("the request could not be planned: {reason}")]
    #[diagnostic(
        code(test::request_unplanned),
        help("check the provider and model, or plan the request with `runner plan`")
    )]
    RequestUnplanned {
        /// Why not.
        reason: String,
    },
}

impl Problem {
    /// The text under the primary label, for the key or value the problem is at; a call site
    /// that knows more may say more with [`crate::Diagnostic::label`].
    pub fn label(&self) -> String {
        match self {
            Problem::Io { .. } => String::new(),
            Problem::TooLarge { .. } => "too large".into(),
            Problem::NotUtf8 { .. } => "this byte is not UTF-8".into(),
            Problem::YamlSyntax { .. } => "here".into(),
            Problem::JsonSyntax { .. } => "here".into(),
            Problem::OverLimit { .. } => "here".into(),
            Problem::WrongType { expected, .. } => format!("expected {expected}"),
            Problem::UnknownField { .. } => "unknown field".into(),
            Problem::MissingField { field, .. } => format!("`{field}` is missing"),
            Problem::InvalidValue { .. } => "invalid".into(),
            Problem::UnsupportedVersion { .. } => "unsupported".into(),
            Problem::DuplicateTask { .. } => "second task with this id".into(),
            Problem::UnknownDependency { .. } => "no task has this id".into(),
            Problem::SelfDependency { .. } => "a task cannot wait for itself".into(),
            Problem::Cycle { .. } => "this task is part of the cycle".into(),
            Problem::UnknownGateInput { .. } => "no task has this id".into(),
            Problem::UnknownAgent { .. } => "no agent has this name".into(),
            Problem::UnknownTool { .. } => "no tool has this name".into(),
            Problem::UnknownProvider { .. } => "no provider has this name".into(),
            Problem::TemplateSyntax { .. } => "in this template".into(),
            Problem::TemplateUnknownVariable { .. } => "not defined".into(),
            Problem::TemplateNotAncestor { read, .. } => format!("`{read}` may not have run yet"),
            Problem::ExpressionSyntax { .. } => "in this expression".into(),
            Problem::ItemOutsideMap { .. } => "only set inside a map".into(),
            Problem::UndeclaredVar { .. } => "not declared".into(),
            Problem::UnboundedMap { .. } => "a list from run-time data, of any length".into(),
            Problem::TooManyItems { items, .. } => format!("{items} items"),
            Problem::SkipOnCritical { .. } => "`skip` here".into(),
            Problem::ReplanWithoutPlanner { .. } => "`replan` here".into(),
            Problem::ReplanInMap { .. } => "`replan` on a map".into(),
            Problem::WrongTaskType { kind, .. } => format!("only for `type: {kind}`"),
            Problem::SubPlanMissing { .. } => "no such plan file".into(),
            Problem::SubPlanInvalid { errors, .. } => format!("{errors} error(s) in this plan"),
            Problem::SubPlanVar { declared, .. } if declared.is_empty() => "its `spec.vars` declares none".into(),
            Problem::SubPlanVar { declared, .. } => format!("it declares {}", declared.join(", ")),
            Problem::SubPlanCycle { .. } => "includes a plan that includes this one".into(),
            Problem::SubPlanTooDeep { most, .. } => format!("file {} of the chain, one too many", most + 1),
            Problem::InvalidSchema { .. } => "not a valid JSON Schema".into(),
            Problem::MissingAttachment { .. } => "no such file".into(),
            Problem::EmptyWorkflow => "no tasks".into(),
            Problem::LiteralApiKey { .. } => "not a variable name (value hidden)".into(),
            Problem::LiteralSecret { field, .. } if field == "url" => "credentials in the url (value hidden)".into(),
            Problem::LiteralSecret { .. } => "not a variable name (value hidden)".into(),
            Problem::Alias { canonical, .. } => format!("read as `{canonical}`"),
            Problem::ImplicitInputs { .. } => "this input".into(),
            Problem::Unsupported { .. } => "ignored".into(),
            Problem::ReplacementNotJson { .. } => "here".into(),
            Problem::UnknownTarget { what, .. } => format!("no {what} of the plan has this name"),
            Problem::UnknownFinding { .. } => "no finding has this code".into(),
            Problem::PlanInvalid { .. } => "this plan".into(),
            Problem::RequestUnplanned { .. } => "this request".into(),
        }
    }
}
