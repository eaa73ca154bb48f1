//! `type: expand` tasks: the task's agent writes a plan for the step, which is checked through
//! the same gate as a replan (read like a manifest with the plan's agents, validated, one
//! repair round with the problems, bounded by `max_tasks`, refused when the critic scores it
//! under [`MIN_SCORE`]) and then runs as a child run, whose `RunCreated` records it whole. A
//! resumed or retried attempt finds the child and never asks the agent again.

use std::fmt::Write as _;
use std::sync::Arc;

use machine::child::child_run_id;
use manifest::Plan;
use manifest::plan::TaskKind;
use manifest::splice::splice;
use tokio_util::sync::CancellationToken;

use super::subplan::{ChildPlan, Children, run_child};
use super::{AgentRuntime, Attempt, Pending, Reply};
use crate::attempt::add;
use crate::event::{ErrorClass, Tokens};

/// The most tasks a written plan may have when the task sets no `max_tasks`.
pub const DEFAULT_MAX_TASKS: u32 = 20;

/// The lowest critic score (out of 10) a written plan may have.
pub const MIN_SCORE: f64 = 5.0;

/// The runtime of a `type: expand` task: its agent's runtime writes the plan.
pub struct ExpandRuntime {
    agent: Arc<dyn AgentRuntime>,
    children: Arc<dyn Children>,
    /// The parent's plan with no tasks: the agents, tools and control a written plan uses.
    base: Arc<Plan>,
    max_tasks: u32,
}

impl ExpandRuntime {
    /// The runtime of task `task` of `plan`, whose agent runs on `agent`, its children kept in
    /// `children`, writing at most `max_tasks` tasks. The written plan is named `PLAN.TASK`.
    pub fn new(
        agent: Arc<dyn AgentRuntime>,
        children: Arc<dyn Children>,
        plan: &Plan,
        task: &str,
        max_tasks: Option<u32>,
    ) -> Self {
        let mut base = plan.with_tasks(Vec::new());
        base.name = format!("{}.{task}", plan.name);
        ExpandRuntime { agent, children, base: Arc::new(base), max_tasks: max_tasks.unwrap_or(DEFAULT_MAX_TASKS) }
    }
}

impl AgentRuntime for ExpandRuntime {
    fn run(&self, attempt: Attempt, cancel: CancellationToken) -> Pending {
        let (agent, children, base, max_tasks) =
            (Arc::clone(&self.agent), Arc::clone(&self.children), Arc::clone(&self.base), self.max_tasks);
        Box::pin(async move {
            let vars = children.vars();
            // A child of an earlier attempt holds the plan already written: go on with it.
            for n in (1..=attempt.attempt).rev() {
                let id = child_run_id(children.parent(), &attempt.task, n);
                match children.load(&id).await {
                    Ok(Some(state)) => {
                        let child = ChildPlan { plan: Arc::new(state.written_plan()), source: None };
                        return run_child(&*children, &attempt, child, vars, cancel).await;
                    }
                    Ok(None) => {}
                    Err(error) => return Reply::transient(format!("cannot read the expanded run `{id}`: {error}")),
                }
            }
            let (plan, tokens) = match write_plan(&*agent, &attempt, &base, max_tasks, cancel.clone()).await {
                Ok(written) => written,
                Err(reply) => return reply,
            };
            let vars = match plan.run_vars(vars) {
                Ok(vars) => vars,
                Err(error) => return Reply::refused(format!("{error}; {}", error.help())).with_tokens(tokens),
            };
            let child = ChildPlan { plan: Arc::new(plan), source: None };
            let reply = run_child(&*children, &attempt, child, vars, cancel).await;
            let used = add(tokens, reply.tokens());
            reply.with_tokens(used)
        })
    }
}

/// Asks the agent for the plan, with one repair round; the plan, or the failure to report.
async fn write_plan(
    agent: &dyn AgentRuntime,
    attempt: &Attempt,
    base: &Plan,
    max_tasks: u32,
    cancel: CancellationToken,
) -> Result<(Plan, Option<Tokens>), Reply> {
    let ask = prompt(base, &attempt.input, max_tasks);
    let mut question = ask.clone();
    let mut tokens = None;
    let mut problems = String::new();
    // The step's own id is the place the written tasks take in an otherwise empty plan.
    let mut holder = base.clone();
    holder.tasks = vec![manifest::plan::Task {
        id: manifest::plan::At::new(attempt.task.as_str().into(), manifest::Loc::default()),
        kind: TaskKind::Task,
        ..manifest::plan::Task::default()
    }];
    for round in 1..=2 {
        let request = Attempt {
            schema: Some(serde_json::json!({"type": "object", "required": ["workflow"]})),
            ..Attempt::new(attempt.task.clone(), round, question.as_str(), attempt.workdir.clone())
        };
        let answer = match agent.run(request, cancel.clone()).await {
            Reply::Output { text, tokens: used } => {
                tokens = add(tokens, used);
                text
            }
            Reply::Failure { error, class, tokens: used } => {
                let error = format!("the agent could not write the step's plan: {error}");
                return Err(Reply::Failure { error, class, tokens: add(tokens, used) });
            }
            Reply::Question(question, used) => return Err(Reply::Question(question, add(tokens, used))),
        };
        let spliced = splice(&holder, &[attempt.task.as_str()], &attempt.task, &answer);
        problems = spliced.problems();
        if let (true, Some(plan)) = (spliced.is_valid(), spliced.plan) {
            problems = over_bounds(&plan, max_tasks);
            if problems.is_empty() {
                return Ok((plan, tokens));
            }
        }
        question = format!(
            "{ask}\n\nYour answer was:\n{answer}\n\nIt has these problems:\n{problems}\n\
             Answer again with the corrected JSON object only."
        );
    }
    let error =
        format!("the plan the agent wrote for this step is still refused after one repair:\n{}", problems.trim());
    Err(Reply::Failure { error, class: ErrorClass::Permanent, tokens })
}

/// What keeps a valid written plan from running: more tasks than `max_tasks`, or a critic
/// score under [`MIN_SCORE`] (with the critic's findings); empty when it may run.
fn over_bounds(plan: &Plan, max_tasks: u32) -> String {
    let mut problems = String::new();
    if plan.tasks.len() > max_tasks as usize {
        let _ = writeln!(
            problems,
            "- the plan has {} tasks, more than this step's `max_tasks` of {max_tasks}: write fewer, larger tasks",
            plan.tasks.len()
        );
        return problems;
    }
    let critique = manifest::critic::critique(plan);
    if critique.scores.overall < MIN_SCORE {
        let _ =
            writeln!(problems, "- the critic scores the plan {:.1}/10, under {MIN_SCORE}:", critique.scores.overall);
        for finding in &critique.findings {
            let _ = writeln!(problems, "  - {}: {finding}", finding.code());
        }
    }
    problems
}

/// The agent's question: the step, the agents it may use, and the shape of the answer.
fn prompt(base: &Plan, step: &str, max_tasks: u32) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "Break this step of a running workflow down into a plan of at most {max_tasks} tasks:\n\n{step}"
    );
    if let Some(mission) = &base.mission {
        let _ = writeln!(text, "\nThe workflow's mission: {mission}");
    }
    let _ = writeln!(text, "\nAgents you can use:");
    for (name, agent) in &base.agents {
        let about = agent.system_prompt.as_deref().and_then(|p| p.lines().next()).unwrap_or("");
        let _ = writeln!(text, "- {name} ({}) {about}", agent.runtime.name());
    }
    let _ = write!(
        text,
        "\nAnswer with exactly one JSON object and nothing else: {{\"workflow\": [...]}}. Each task is an object \
         with \"id\", \"agent\", \"input\" and \"depends_on\" (a list of task ids), and optionally \"type\" (task, \
         synthesis_gate, human_review), \"inputs\", \"max_output_tokens\", \"on_failure\" (retry, skip, fail) and \
         \"critical\". A task's input may use {{{{ tasks.ID.output }}}} for the output of a task it depends on. \
         The step's result is the output of the plan's last task (or of every task nothing depends on)."
    );
    text
}
