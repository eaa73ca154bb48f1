//! From the spanned tree to a normalised [`Plan`], in either form.
//!
//! Which keys a mapping has, their aliases and the bounds of their numbers come from the field
//! tables in [`crate::fields`]; the code here turns the values read into the normalised types.

mod agents;
mod cache;
mod control;
mod tasks;

use crate::diagnostic::{Diagnostic, Problem};
use crate::fields::{API_VERSION, COMPLEXITY, ENVELOPE, METADATA, MISSION_ANALYSIS, NESTED_PLAN, SPEC, WORKFLOW_KEYS};
use crate::node_path::NodePath;
use crate::plan::{
    Agent, At, Complexity, DEFAULT_AGENT, Form, Generation, MissionAnalysis, Plan, Runtime, Strategy, Task, TaskKind,
};
use crate::read::{Entry, Fields, Reader, words_of};
use crate::source::Loc;
use crate::template;
use crate::tree::{Node, Value};
use agents::{read_agent, read_provider, read_tool};
use control::{add_gates, read_control};

pub(crate) use agents::read_usage;
pub(crate) use tasks::read_workflow;

/// The line that starts the dependency outputs appended to a bare-form task's input.
pub const DEPENDENCY_OUTPUTS: &str = "Results of the tasks this one depends on:";

/// The turn limit of the built-in `default` agent of bare-form plans.
pub const BUILT_IN_MAX_TURNS: u32 = 10;

/// Which form a document is in: the envelope's keys decide.
pub(crate) fn form_of(root: &Node) -> Form {
    let Value::Map(entries) = &root.value else { return Form::Enveloped };
    let enveloped = entries.iter().any(
        |(k, _)| matches!(&k.value, Value::Str(s) if matches!(s.as_str(), "apiVersion" | "kind" | "metadata" | "spec")),
    );
    if enveloped { Form::Enveloped } else { Form::Bare }
}

/// Normalises a document; the plan is returned even when diagnostics hold errors, so that
/// validation can report everything in one pass. The workflow is taken out of `root` and read
/// task by task, each task's nodes dropped once it is read, so that a large plan's tree and its
/// tasks are not held whole at once.
pub(crate) fn normalize(root: &mut Node, stem: &str, reader: &mut Reader) -> Option<Plan> {
    let top = NodePath::root();
    let plan = read_plan(root, stem, reader, &top);
    top.shrink_table();
    plan
}

fn read_plan(root: &mut Node, stem: &str, reader: &mut Reader, top: &NodePath) -> Option<Plan> {
    let mut plan = Plan { form: reader.form, ..Plan::default() };
    let rest = {
        let root = &*root;
        let spec = match reader.form {
            Form::Enveloped => {
                let top = reader.fields(root, top, "the manifest", ENVELOPE.fields, &[])?;
                check_envelope(reader, &top);
                if let Some((metadata, path)) = reader.require(&top, "metadata", "the manifest") {
                    read_metadata(reader, metadata, path, &mut plan);
                }
                let (spec, path) = reader.require(&top, "spec", "the manifest")?;
                reader.fields(spec.value, path, "spec", SPEC.fields, &[])?
            }
            Form::Bare => {
                plan.name = stem.to_owned();
                if !matches!(root.value, Value::Map(_)) {
                    reader.wrong_type(root, top, "a plan", "a mapping with a workflow");
                    return None;
                }
                reader.fields(root, top, "the plan", SPEC.fields, &[])?
            }
        };
        read_spec(reader, &spec, &mut plan)
    };
    if let Some((at, path)) = rest.workflow {
        let node = take(root, at, WORKFLOW_DEPTH)
            .expect("read_spec found the workflow among the entries of the spec or of its nested plan, in this tree");
        plan.tasks = read_workflow(reader, node, &path);
    }
    finish_spec(reader, rest.gates, &mut plan);
    Some(plan)
}

/// How deep below the root `read_spec` finds a workflow: an entry of the spec, or of its nested
/// `plan` (merge keys are already merged into the mapping that holds them).
const WORKFLOW_DEPTH: usize = 3;

/// What of the spec is read after the workflow: where the workflow is (its node's address in
/// the tree, and its path), and the seed's gates, added once the tasks are known.
struct Rest {
    workflow: Option<(*const Node, NodePath)>,
    gates: Vec<control::SeedGate>,
}

/// Takes the node at address `at` out of the tree, at most `depth` levels below `node`,
/// leaving a null in its place.
fn take(node: &mut Node, at: *const Node, depth: usize) -> Option<Node> {
    if std::ptr::eq(node, at) {
        let span = node.span();
        return Some(std::mem::replace(node, Node::new(Value::Null, span)));
    }
    if depth == 0 {
        return None;
    }
    match &mut node.value {
        Value::Map(entries) => entries.iter_mut().find_map(|(_, value)| take(value, at, depth - 1)),
        Value::Seq(items) => items.iter_mut().find_map(|item| take(item, at, depth - 1)),
        _ => None,
    }
}

fn check_envelope(reader: &mut Reader, top: &Fields<'_>) {
    for (name, expected) in [("apiVersion", API_VERSION), ("kind", "Plan")] {
        let Some((entry, path)) = reader.require(top, name, "the manifest") else { continue };
        let Some(value) = reader.string::<String>(entry, path, name) else { continue };
        if value.value != expected {
            let field = if name == "kind" { "kind" } else { "apiVersion" };
            reader.push(Diagnostic::error(
                Problem::UnsupportedVersion { field, found: value.value.clone(), expected },
                value.loc,
            ));
        }
    }
}

fn read_metadata(reader: &mut Reader, entry: Entry<'_>, path: &NodePath, plan: &mut Plan) {
    let Some(meta) = reader.fields(entry.value, path, "metadata", METADATA.fields, &[]) else { return };
    let meta = meta.owned_by(&Loc::new(entry.key.span(), path));
    if let Some((entry, path)) = reader.require(&meta, "name", "metadata")
        && let Some(name) = reader.string(entry, path, "metadata.name")
    {
        plan.name = name.value;
    }
    if let Some((entry, path)) = meta.get("description") {
        plan.description = reader.string(entry, path, "metadata.description").map(|d| d.value);
    }
    if let Some((entry, path)) = meta.get("labels") {
        for (key, value, item_path) in reader.named(entry, path, "labels") {
            if let Some(text) = reader.string(Entry { key: value, value }, &item_path, "a label") {
                plan.labels.insert(key.value, text.value);
            }
        }
    }
}

fn read_spec(reader: &mut Reader, spec: &Fields<'_>, plan: &mut Plan) -> Rest {
    plan.mission = reader.text_of(spec, "mission").map(|m| m.value);
    if let Some((entry, path)) = spec.get("mission_analysis") {
        plan.mission_analysis = read_mission_analysis(reader, entry.value, path);
    }
    if let Some((entry, path)) = spec.get("vars") {
        let mut vars = std::collections::BTreeMap::new();
        for (name, node, _) in reader.named(entry, path, "vars") {
            vars.insert(name.value, reader.json(node));
        }
        plan.vars = Some(vars);
    }
    if let Some((entry, path)) = spec.get("providers") {
        for (name, node, item_path) in reader.named(entry, path, "providers") {
            if let Some(provider) = read_provider(reader, node, &item_path, &name) {
                plan.providers.insert(name.value, provider);
            }
        }
    }
    if let Some((entry, path)) = spec.get("tools") {
        for (name, node, item_path) in reader.named(entry, path, "tools") {
            if let Some(tool) = read_tool(reader, node, &item_path, &name) {
                plan.tools.insert(name.value, tool);
            }
        }
    }
    let nested =
        spec.get("plan").and_then(|(entry, path)| reader.fields(entry.value, path, "plan", NESTED_PLAN.fields, &[]));
    let agents = spec.get("agent_definitions").or_else(|| nested.as_ref().and_then(|n| n.get("agent_definitions")));
    if let Some((entry, path)) = agents {
        for (name, node, item_path) in reader.named(entry, path, "agent_definitions") {
            if let Some(agent) = read_agent(reader, node, &item_path, &name) {
                plan.agents.insert(name.value, agent);
            }
        }
    }
    let [workflow_key, ..] = WORKFLOW_KEYS;
    let workflow = spec.get(workflow_key).or_else(|| nested.as_ref().and_then(|n| n.get(workflow_key)));
    let workflow = match workflow {
        Some((entry, path)) => Some((std::ptr::from_ref(entry.value), path.clone())),
        None => {
            let at = nested.as_ref().map_or(spec.loc.clone(), |n| n.loc.clone());
            reader.push(
                Diagnostic::error(Problem::EmptyWorkflow, at)
                    .label("no `workflow` here")
                    .help("add `workflow:` with a list of tasks"),
            );
            None
        }
    };
    let mut gates = Vec::new();
    if let Some((entry, path)) = spec.get("control_logic") {
        plan.control = read_control(reader, entry.value, path, &mut gates);
    }
    Rest { workflow, gates }
}

/// What is done once the tasks are read: the seed's gates added, a sequential plan chained in
/// list order, and the bare form's dependency outputs and built-in agent.
fn finish_spec(reader: &mut Reader, gates: Vec<control::SeedGate>, plan: &mut Plan) {
    add_gates(plan, gates);
    if plan.control.strategy == Strategy::Sequential {
        chain_in_list_order(&mut plan.tasks);
    }
    if reader.form == Form::Bare {
        for task in &mut plan.tasks {
            append_dependency_outputs(reader, task);
        }
    }
    if reader.form == Form::Bare {
        add_built_in_agent(plan);
    }
    plan.tasks.shrink_to_fit();
}

/// Bare-form plans may leave a task's agent out: when one does and the plan defines no
/// `default` agent, the built-in one (an llm agent on the `default` provider) is added.
pub(crate) fn add_built_in_agent(plan: &mut Plan) {
    if !plan.agents.contains_key(DEFAULT_AGENT) {
        let uses_default = plan.tasks.iter().any(|t| plan.agent_of(t) == Some(DEFAULT_AGENT));
        if uses_default {
            let runtime = Runtime::Llm {
                provider: None,
                model: None,
                tools: Vec::new(),
                allow_tools: Vec::new(),
                max_turns: Some(BUILT_IN_MAX_TURNS),
                tool_choice: None,
                generation: Generation::default(),
            };
            plan.agents.insert(DEFAULT_AGENT.into(), Agent { runtime, ..Agent::default() });
        }
    }
}

fn read_mission_analysis(reader: &mut Reader, node: &Node, path: &NodePath) -> Option<MissionAnalysis> {
    let fields = reader.fields(node, path, "mission_analysis", MISSION_ANALYSIS.fields, &[])?;
    let mut analysis = MissionAnalysis::default();
    if let Some((entry, path)) = fields.get("estimated_complexity") {
        let words = words_of::<Complexity>(&COMPLEXITY);
        analysis.estimated_complexity = reader.word(entry, path, "estimated_complexity", &words, &[]);
    }
    if let Some((entry, path)) = fields.get("critical_path") {
        analysis.critical_path = reader.strings(entry, path, "a task id");
    }
    if let Some((entry, path)) = fields.get("required_capabilities") {
        analysis.required_capabilities =
            reader.strings(entry, path, "a capability").into_iter().map(|c| c.value).collect();
    }
    Some(analysis)
}

/// `strategy: sequential` runs the list as a chain: each task waits for the one before it.
pub(crate) fn chain_in_list_order(tasks: &mut [Task]) {
    for i in 1..tasks.len() {
        let previous = tasks[i - 1].id.value.clone();
        if !tasks[i].depends_on.iter().any(|d| d.value == previous) {
            let loc = tasks[i].id.loc.clone();
            tasks[i].depends_on.reserve_exact(1);
            tasks[i].depends_on.push(At::new(previous.clone(), loc));
            tasks[i].chained_after = Some(previous.as_str().into());
        }
    }
}

/// Seed-form planners hand every task the results of its dependencies; here outputs flow only
/// through templates, so a bare-form task that reads no upstream output gets them appended.
pub(crate) fn append_dependency_outputs(reader: &mut Reader, task: &mut Task) {
    if task.kind != TaskKind::Task || task.depends_on.is_empty() {
        return;
    }
    let text = task.input.as_ref().map_or("", |input| input.value.as_str());
    let reads_tasks = match template::Templates::default().references(text) {
        Ok(references) => references.iter().any(|r| r.root == "tasks"),
        Err(_) => true,
    };
    if reads_tasks {
        return;
    }
    let mut block = String::from(if text.is_empty() { "" } else { "\n\n" });
    block.push_str(DEPENDENCY_OUTPUTS);
    for dep in &task.depends_on {
        block.push_str(&format!("\n- {}: {{{{ {} }}}}", dep.value, template::output_of(&dep.value)));
    }
    let loc = task.input.as_ref().map_or_else(|| task.loc.clone(), |input| input.loc.clone());
    reader.push(Diagnostic::info(Problem::ImplicitInputs { task: task.id.value.to_string() }, loc.clone()));
    let input = task.input.get_or_insert_with(|| At::new(String::new(), loc));
    input.value.push_str(&block);
}

#[cfg(test)]
mod tests {
    use crate::fields::{ACTION, COMPLEXITY, Named, RETRY_ON, SCHEMA_DIALECT, STRATEGY, TASK_KIND, TOOL_CHOICE};
    use crate::plan::{Action, Complexity, RetryOn, SchemaDialect, Strategy, TaskKind, ToolChoice};
    use crate::read::words_of;

    fn all_read<T: serde::de::DeserializeOwned>(named: &Named) {
        assert_eq!(words_of::<T>(named).len(), named.words().len(), "a word of `{}` names no value", named.name);
    }

    #[test]
    fn every_word_in_the_tables_is_a_value_of_the_normalised_type() {
        all_read::<Complexity>(&COMPLEXITY);
        all_read::<Strategy>(&STRATEGY);
        all_read::<TaskKind>(&TASK_KIND);
        all_read::<Action>(&ACTION);
        all_read::<RetryOn>(&RETRY_ON);
        all_read::<ToolChoice>(&TOOL_CHOICE);
        all_read::<SchemaDialect>(&SCHEMA_DIALECT);
    }

    #[test]
    fn the_schema_dialect_words_are_the_dialects_in_order() {
        let words: Vec<&str> = SchemaDialect::ALL.iter().map(|dialect| dialect.as_str()).collect();
        assert_eq!(SCHEMA_DIALECT.words(), words.as_slice());
    }
}
