//! Provider settings the engine relies on are checked when the plan loads.

fn plan(tokenizer: &str) -> String {
    format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n  providers:\n    local:\n      kind: openai\n      \
         base_url: http://localhost:11434/v1\n      model: m\n      tokenizer: {tokenizer}\n  agent_definitions:\n    \
         a: {{runtime: llm, provider: local}}\n  workflow:\n    - {{id: t, agent: a, input: x}}\n"
    )
}

#[test]
fn a_tokenizer_the_engine_cannot_count_with_is_an_error_at_its_value() {
    let loaded = manifest::load_str("t.yaml", "t", &plan("gpt2"), &|_| true);
    let error = loaded.errors().next().expect("an unknown tokenizer is an error");
    assert_eq!(error.code(), "plan::invalid_value");
    assert_eq!(error.loc.path, "spec.providers.local.tokenizer");
    assert!(error.to_string().contains("o200k_base"), "{error}");
    for name in manifest::TOKENIZERS {
        assert!(manifest::load_str("t.yaml", "t", &plan(name), &|_| true).is_valid(), "{name}");
    }
}

/// A plan whose provider `local` has these extra settings and whose llm agent `a` has these.
fn with_settings(provider: &str, agent: &str) -> String {
    format!(
        "apiVersion: runner/v1\nkind: Plan\nmetadata: {{name: t}}\nspec:\n  providers:\n    local:\n      kind: openai\n      \
         base_url: http://localhost:11434/v1\n      model: m\n{provider}\n  agent_definitions:\n    \
         a: {{runtime: llm, provider: local{agent}}}\n  workflow:\n    - {{id: t, agent: a, input: x}}\n"
    )
}

#[test]
fn generation_settings_streaming_and_tool_choice_are_read_from_providers_and_agents() {
    use manifest::plan::{Generation, Runtime, ToolChoice};
    let text = with_settings(
        "      max_tokens: 512\n      temperature: 0.7\n      seed: 42\n      stream: false\n      idle_timeout: 90s",
        ", max_tokens: 64, temperature: 0, tool_choice: required",
    );
    let loaded = manifest::load_str("t.yaml", "t", &text, &|_| true);
    let errors: Vec<String> = loaded.errors().map(|d| d.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let plan = loaded.plan.expect("the plan loads");
    let provider = &plan.providers["local"];
    assert_eq!(provider.generation, Generation { max_tokens: Some(512), temperature: Some(0.7), seed: Some(42) });
    assert_eq!(provider.stream, Some(false));
    assert_eq!(provider.idle_timeout.map(|d| d.to_std()), Some(std::time::Duration::from_secs(90)));
    let Runtime::Llm { tool_choice, generation, .. } = &plan.agents["a"].runtime else { panic!("an llm agent") };
    assert_eq!(*tool_choice, Some(ToolChoice::Required));
    assert_eq!(
        generation.or(provider.generation),
        Generation { max_tokens: Some(64), temperature: Some(0.0), seed: Some(42) }
    );
}

#[test]
fn bad_generation_settings_are_errors_at_their_values() {
    for (provider, agent, path) in [
        ("      max_tokens: 0", "", "spec.providers.local.max_tokens"),
        ("      temperature: 3", "", "spec.providers.local.temperature"),
        ("      stream: sometimes", "", "spec.providers.local.stream"),
        ("", ", tool_choice: always", "spec.agent_definitions.a.tool_choice"),
        ("", ", seed: -1", "spec.agent_definitions.a.seed"),
    ] {
        let loaded = manifest::load_str("t.yaml", "t", &with_settings(provider, agent), &|_| true);
        let error = loaded.errors().next().unwrap_or_else(|| panic!("`{provider}{agent}` is an error"));
        assert_eq!(error.loc.path, path, "{error}");
    }
}

#[test]
fn schema_dialect_is_read_and_defaults_to_json_schema() {
    use manifest::plan::SchemaDialect;
    let dialect_of = |provider: &str| {
        let loaded = manifest::load_str("t.yaml", "t", &with_settings(provider, ""), &|_| true);
        let plan = loaded.plan.expect("the plan loads");
        plan.providers["local"].schema_dialect()
    };
    assert_eq!(dialect_of(""), SchemaDialect::JsonSchema);
    for dialect in SchemaDialect::ALL {
        assert_eq!(dialect_of(&format!("      schema_dialect: {}", dialect.as_str())), dialect);
    }
}

#[test]
fn an_unknown_schema_dialect_is_an_error_at_its_value_with_a_suggestion() {
    let text = with_settings("      schema_dialect: json_shema", "");
    let loaded = manifest::load_str("t.yaml", "t", &text, &|_| true);
    let error = loaded.errors().next().expect("an unknown dialect is an error");
    assert_eq!(error.code(), "plan::invalid_value");
    assert_eq!(error.loc.path, "spec.providers.local.schema_dialect");
    let rendered = format!("{error} {:?}", error.help);
    assert!(rendered.contains("json_schema"), "{rendered}");
}

#[test]
fn a_price_is_read_with_its_currency_and_survives_the_plans_json() {
    let text = with_settings("      price: {input_per_mtok: 0.15, output_per_mtok: 0.6}", "");
    let loaded = manifest::load_str("t.yaml", "t", &text, &|_| true);
    assert!(loaded.is_valid(), "{:?}", loaded.errors().map(|d| d.to_string()).collect::<Vec<_>>());
    let plan = loaded.plan.expect("the plan loads");
    let price = plan.providers["local"].price.clone().expect("a price");
    assert_eq!((price.input_per_mtok, price.output_per_mtok, price.currency.as_str()), (0.15, 0.6, "USD"));
    assert!((price.cost(2_000_000, 1_000_000) - 0.9).abs() < 1e-9);
    let json = serde_json::to_string(&plan).expect("the plan is JSON");
    let back: manifest::Plan = serde_json::from_str(&json).expect("and reads back");
    assert_eq!(back.providers["local"].price, Some(price));
    let euros = with_settings("      price: {input_per_mtok: 1, output_per_mtok: 2, currency: EUR}", "");
    let plan = manifest::load_str("t.yaml", "t", &euros, &|_| true).plan.expect("the plan loads");
    assert_eq!(plan.providers["local"].price.as_ref().map(|p| p.currency.as_str()), Some("EUR"));
}

#[test]
fn a_bad_price_is_an_error_at_its_value() {
    for (price, path) in [
        ("{input_per_mtok: -1, output_per_mtok: 2}", "spec.providers.local.price.input_per_mtok"),
        ("{input_per_mtok: 1, output_per_mtok: cheap}", "spec.providers.local.price.output_per_mtok"),
        ("{input_per_mtok: 1, output_per_mtok: 2, currency: dollars}", "spec.providers.local.price.currency"),
        ("{input_per_mtok: 1, output_per_mtok: 2, per: token}", "spec.providers.local.price.per"),
        ("{output_per_mtok: 2}", "spec.providers.local.price"),
        ("5", "spec.providers.local.price"),
    ] {
        let text = with_settings(&format!("      price: {price}"), "");
        let loaded = manifest::load_str("t.yaml", "t", &text, &|_| true);
        let error = loaded.errors().next().unwrap_or_else(|| panic!("`{price}` is an error"));
        assert_eq!(error.loc.path, path, "{price}: {error}");
    }
}
