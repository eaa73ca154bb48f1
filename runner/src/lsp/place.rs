//! Where a cursor is in a block-YAML document, read from the text around it by indentation:
//! the keys of the mappings it is in, whether it is at a key or a value, and the word being
//! typed. It reads half-written documents that no parser accepts, which is what an editor has
//! while its user types.

/// The cursor's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The keys of the mappings around the cursor, outermost first (list positions left out).
    pub path: Vec<String>,
    /// Where the cursor is.
    pub at: At,
    /// The word before the cursor on its line, which a completion replaces.
    pub prefix: String,
}

/// What the cursor is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// A key of the mapping at the path, being written.
    Key,
    /// The value of this key of the mapping at the path, written on the key's line.
    Value(String),
    /// An entry of the block list that is the value of this key (after `- `): a scalar, or the
    /// first key of a mapping.
    Entry(String),
    /// A task named in a template: after `tasks.` inside `{{ }}`.
    TemplateTask,
}

/// The place of byte `offset` in `text`.
pub fn place(text: &str, offset: usize) -> Place {
    let offset = floor_boundary(text, offset);
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..offset];
    let prefix: String =
        before.chars().rev().take_while(|c| is_word(*c)).collect::<Vec<_>>().into_iter().rev().collect();
    let (content, dashes) = content_column(before);
    let path = parents(text, line_start, content);
    if in_template(before) && before[..before.len() - prefix.len()].ends_with("tasks.") {
        return Place { path, at: At::TemplateTask, prefix };
    }
    let rest = &before[content.min(before.len())..];
    if let Some((key, _)) = split_key(rest) {
        return Place { path, at: At::Value(key.to_owned()), prefix };
    }
    let mut path = path;
    if dashes > 0 && rest.len() == prefix.len() {
        // An entry of a block list: the list is the value of the key above it.
        if let Some(key) = path.pop() {
            return Place { path, at: At::Entry(key), prefix };
        }
    }
    Place { path, at: At::Key, prefix }
}

/// The path of keys to the key under byte `offset`, when the cursor is on a key.
pub fn key_at(text: &str, offset: usize) -> Option<Vec<String>> {
    let offset = floor_boundary(text, offset);
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    let (content, _) = content_column(line);
    let (key, _) = split_key(&line[content.min(line.len())..])?;
    let key_end = content + line[content..].find(':')?;
    if offset - line_start < content || offset - line_start > key_end {
        return None;
    }
    let mut path = parents(text, line_start, content);
    path.push(key.to_owned());
    Some(path)
}

/// The column where a line's content starts (after its indentation and list dashes), and how
/// many list dashes it has.
fn content_column(line: &str) -> (usize, usize) {
    let mut at = 0;
    let mut dashes = 0;
    let bytes = line.as_bytes();
    loop {
        while at < bytes.len() && bytes[at] == b' ' {
            at += 1;
        }
        if at < bytes.len() && bytes[at] == b'-' && (at + 1 == bytes.len() || bytes[at + 1] == b' ') {
            dashes += 1;
            at += 1;
        } else {
            return (at, dashes);
        }
    }
}

/// `key: rest` or `key:` at the start of a line's content, with what follows the colon.
fn split_key(content: &str) -> Option<(&str, &str)> {
    if content.starts_with(['{', '[', '#', '"', '\'']) {
        let quoted = content.starts_with(['"', '\'']);
        if !quoted {
            return None;
        }
        let quote = content.as_bytes()[0] as char;
        let close = content[1..].find(quote)? + 1;
        let rest = content[close + 1..].strip_prefix(':')?;
        return (rest.is_empty() || rest.starts_with(' ')).then(|| (&content[1..close], rest));
    }
    let colon = content.find(": ").or_else(|| content.strip_suffix(':').map(|k| k.len()))?;
    let key = &content[..colon];
    (!key.is_empty() && !key.contains([' ', '{', '['])).then(|| (key, &content[colon + 1..]))
}

/// The keys of the mappings that hold a line whose content starts at column `column`: each key
/// above it at a smaller indentation, walking up.
fn parents(text: &str, line_start: usize, column: usize) -> Vec<String> {
    let mut keys = Vec::new();
    let mut indent = column;
    // After leaving a list entry, the key that holds the list may sit at the dash's column.
    let mut list_holder = false;
    for line in text[..line_start].lines().rev() {
        let first = line.len() - line.trim_start_matches(' ').len();
        let trimmed = &line[first..];
        if trimmed.is_empty() || trimmed.starts_with('#') || first > indent {
            continue;
        }
        let (content, dashes) = content_column(line);
        if dashes > 0 {
            if first < indent {
                if content < indent
                    && let Some((key, rest)) = split_key(&line[content..])
                    && rest.trim().is_empty()
                {
                    keys.push(key.to_owned());
                }
                indent = first;
                list_holder = true;
            }
            continue;
        }
        if first < indent || (list_holder && first == indent) {
            let Some((key, _)) = split_key(trimmed) else { continue };
            keys.push(key.to_owned());
            indent = first;
            list_holder = false;
            if indent == 0 {
                break;
            }
        }
    }
    keys.reverse();
    keys
}

/// Whether the text before the cursor on its line is inside an open `{{`.
fn in_template(before: &str) -> bool {
    match (before.rfind("{{"), before.rfind("}}")) {
        (Some(open), Some(close)) => open > close,
        (Some(_), None) => true,
        _ => false,
    }
}

/// A character of an id or a key.
pub fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-'
}

fn floor_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "\
apiVersion: runner/v1
spec:
  agent_definitions:
    writer:
      runtime: llm
  workflow:
    - id: search
      agent: writer
      on_failure:
        action: retry
      depends_on:
        - first
    - id: next
      input: \"{{ tasks.sea }}\"
      depends_on: [se
      ag
";

    fn at(marker: &str, after: usize) -> usize {
        PLAN.find(marker).expect("the marker is in the plan") + after
    }

    #[test]
    fn a_key_being_written_is_in_the_mapping_its_indentation_says() {
        let place = place(PLAN, at("      ag\n", 8));
        assert_eq!(place.path, ["spec", "workflow"]);
        assert_eq!(place.at, At::Key);
        assert_eq!(place.prefix, "ag");
    }

    #[test]
    fn a_value_names_its_key_and_a_block_list_entry_names_the_list_s_key() {
        let value = place(PLAN, at("action: retry", 13));
        assert_eq!(
            (value.path, value.at),
            (vec!["spec".to_owned(), "workflow".into(), "on_failure".into()], At::Value("action".into()))
        );
        let entry = place(PLAN, at("- first", 7));
        assert_eq!(
            (entry.path, entry.at, entry.prefix.as_str()),
            (vec!["spec".to_owned(), "workflow".into()], At::Entry("depends_on".into()), "first")
        );
        let flow = place(PLAN, at("[se", 3));
        assert_eq!((flow.at, flow.prefix.as_str()), (At::Value("depends_on".into()), "se"));
        let runtime = place(PLAN, at("runtime: llm", 12));
        assert_eq!(runtime.path, ["spec", "agent_definitions", "writer"]);
    }

    #[test]
    fn a_task_in_a_template_is_told_apart() {
        let place = place(PLAN, at("tasks.sea", 9));
        assert_eq!((place.at, place.prefix.as_str()), (At::TemplateTask, "sea"));
    }

    #[test]
    fn the_key_under_the_cursor_has_its_whole_path() {
        assert_eq!(
            key_at(PLAN, at("depends_on:\n", 3)),
            Some(vec!["spec".into(), "workflow".into(), "depends_on".into()])
        );
        assert_eq!(key_at(PLAN, at("id: search", 1)), Some(vec!["spec".into(), "workflow".into(), "id".into()]));
        assert_eq!(key_at(PLAN, at("id: search", 6)), None, "on the value, not the key");
    }
}
