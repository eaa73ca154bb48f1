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
