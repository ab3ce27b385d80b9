//! What a config document may cost, checked on its bytes before the YAML
//! parser sees them: its size, its nesting depth (block indentation levels
//! plus flow `[`/`{` levels; libyaml's work grows with the square of it),
//! and how much text its aliases (`*name`) replay (serde replays an
//! anchored node at every alias, so a small document can stand for a huge
//! one). One pass, linear in the bytes; it only counts, the parser still
//! judges the syntax.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// Largest config document read (a file, a znode, `config push`,
/// `check-config`); the largest fleet the ID layout allows takes a few
/// hundred KB.
pub const MAX_DOCUMENT_BYTES: usize = 4 << 20;
/// Deepest nesting of collections (block levels plus flow `[`/`{` levels);
/// the config's own structure is at most 6 deep.
pub const MAX_NESTING: usize = 32;
/// Most bytes all aliases of a document may replay together.
pub const MAX_ALIAS_BYTES: usize = 1 << 20;

/// Why a document was refused before parsing: the line it was found on
/// (1-based, 0 for the whole document) and which limit it passes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PrescanError {
    /// Line of the problem (0: the whole document).
    pub line: usize,
    /// What limit the document passes, naming it.
    pub message: String,
}

/// Reads at most [`MAX_DOCUMENT_BYTES`] + 1 bytes of the file at `path`:
/// a larger file is refused by [`check`] without being read whole.
pub fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_DOCUMENT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Checks `text` against [`MAX_DOCUMENT_BYTES`], [`MAX_NESTING`] and
/// [`MAX_ALIAS_BYTES`].
pub fn check(text: &str) -> Result<(), PrescanError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(PrescanError {
            line: 0,
            message: format!(
                "the document is more than {MAX_DOCUMENT_BYTES} bytes (the limit on a config document); \
                 shorten it"
            ),
        });
    }
    let mut scan = Scan::default();
    let mut offset = 0;
    for (number, line) in text.split_inclusive('\n').enumerate() {
        scan.line = number + 1;
        scan.start = offset;
        scan.line_text(line.trim_end_matches(['\n', '\r']).as_bytes())?;
        offset += line.len();
    }
    Ok(())
}

/// Who ends an anchored node: a line indented at most this column (block),
/// a `,` or closing bracket at this flow depth (flow), or the end (root).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Block(usize),
    Flow(usize),
    Root,
}

struct OpenAnchor {
    name: Vec<u8>,
    start: usize,
    owner: Owner,
    replayed: usize,
}

#[derive(Default)]
struct Scan {
    line: usize,
    /// Offset of the current line in the text.
    start: usize,
    indents: Vec<usize>,
    flow: usize,
    /// The quote a scalar opened on an earlier line is still in.
    quote: Option<u8>,
    /// Lines indented more than this column are a block scalar's content.
    block_scalar: Option<usize>,
    anchors: HashMap<Vec<u8>, usize>,
    open: Vec<OpenAnchor>,
    replayed: usize,
}

fn is_flow_indicator(b: u8) -> bool {
    matches!(b, b',' | b'[' | b']' | b'{' | b'}')
}

/// The end of the name starting at `at` (an anchor's or an alias's).
fn name_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .position(|&b| b == b' ' || b == b'\t' || is_flow_indicator(b))
        .map_or(bytes.len(), |n| at + n)
}

impl Scan {
    fn error(&self, message: String) -> PrescanError {
        PrescanError {
            line: self.line,
            message,
        }
    }

    fn depth_check(&self) -> Result<(), PrescanError> {
        if self.indents.len() + self.flow > MAX_NESTING {
            return Err(self.error(format!(
                "collections nested more than {MAX_NESTING} deep (the limit on a config document's \
                 nesting); the config needs at most 6"
            )));
        }
        Ok(())
    }

    fn push_indent(&mut self, col: usize) -> Result<(), PrescanError> {
        if self.indents.last().is_none_or(|&top| col > top) {
            self.indents.push(col);
            self.depth_check()?;
        }
        Ok(())
    }

    /// Ends the anchors `ends` says are over, at offset `end`.
    fn close_anchors(&mut self, end: usize, ends: impl Fn(Owner) -> bool) {
        while let Some(open) = self.open.last() {
            if !ends(open.owner) {
                break;
            }
            let Some(open) = self.open.pop() else { break };
            let size = end.saturating_sub(open.start) + open.replayed;
            self.anchors.insert(open.name, size);
        }
    }

    fn anchor(&mut self, name: &[u8], at: usize, owner: Owner) -> Result<(), PrescanError> {
        if self.open.len() >= MAX_NESTING {
            return Err(self.error(format!(
                "anchors (&name) nested more than {MAX_NESTING} deep (the limit on a config document's \
                 nesting)"
            )));
        }
        self.open.push(OpenAnchor {
            name: name.to_vec(),
            start: self.start + at,
            owner,
            replayed: 0,
        });
        Ok(())
    }

    fn alias(&mut self, name: &[u8]) -> Result<(), PrescanError> {
        if self.open.iter().any(|open| open.name == name) {
            return Err(self.error(format!(
                "alias *{} refers to the node it is in",
                String::from_utf8_lossy(name)
            )));
        }
        let size = self.anchors.get(name).copied().unwrap_or(0);
        self.replayed = self.replayed.saturating_add(size);
        for open in &mut self.open {
            open.replayed = open.replayed.saturating_add(size);
        }
        if self.replayed > MAX_ALIAS_BYTES {
            return Err(self.error(format!(
                "aliases (*name) replay more than {MAX_ALIAS_BYTES} bytes of anchored text (the limit \
                 on a config document's aliases); write the values out or use fewer aliases"
            )));
        }
        Ok(())
    }

    /// The end of the quoted scalar whose body starts at `at` (after its
    /// opening quote), or `None` when it goes on past this line.
    fn quoted_end(bytes: &[u8], mut at: usize, quote: u8) -> Option<usize> {
        while at < bytes.len() {
            match bytes[at] {
                b'\\' if quote == b'"' => at += 2,
                b'\'' if quote == b'\'' && bytes.get(at + 1) == Some(&b'\'') => at += 2,
                b if b == quote => return Some(at + 1),
                _ => at += 1,
            }
        }
        None
    }

    fn line_text(&mut self, bytes: &[u8]) -> Result<(), PrescanError> {
        let mut at = 0;
        if let Some(quote) = self.quote {
            match Self::quoted_end(bytes, 0, quote) {
                None => return Ok(()),
                Some(end) => {
                    self.quote = None;
                    if self.flow == 0 {
                        return Ok(());
                    }
                    at = end;
                }
            }
        }
        let indent = bytes.iter().take_while(|&&b| b == b' ').count();
        let blank = indent == bytes.len() || bytes[indent] == b'#';
        if self.flow > 0 {
            return self.flow_text(bytes, at.max(indent));
        }
        if let Some(owner) = self.block_scalar {
            if blank || indent > owner {
                return Ok(());
            }
            self.block_scalar = None;
        }
        if blank {
            return Ok(());
        }
        let rest = &bytes[indent..];
        if rest.starts_with(b"---") || rest.starts_with(b"...") || rest.starts_with(b"%") {
            return Ok(());
        }
        self.close_anchors(self.start, |owner| match owner {
            Owner::Block(col) => col >= indent,
            Owner::Flow(_) => true,
            Owner::Root => false,
        });
        while self.indents.last().is_some_and(|&top| top > indent) {
            self.indents.pop();
        }
        self.push_indent(indent)?;
        let parent = self
            .indents
            .iter()
            .rev()
            .nth(1)
            .map_or(Owner::Root, |&col| Owner::Block(col));
        self.block_text(bytes, indent, parent)
    }

    /// A line (from `at`) outside flow collections; `owner` ends the node
    /// whose value comes next.
    fn block_text(
        &mut self,
        bytes: &[u8],
        mut at: usize,
        mut owner: Owner,
    ) -> Result<(), PrescanError> {
        loop {
            while at < bytes.len() && (bytes[at] == b' ' || bytes[at] == b'\t') {
                at += 1;
            }
            let Some(&b) = bytes.get(at) else {
                return Ok(());
            };
            let next = bytes.get(at + 1).copied();
            let indicator_ends = next.is_none_or(|n| n == b' ' || n == b'\t');
            match b {
                b'#' => return Ok(()),
                b'-' | b'?' | b':' if indicator_ends => {
                    if b != b':' {
                        self.push_indent(at)?;
                        owner = Owner::Block(at);
                    }
                    at += 1;
                }
                b'&' => {
                    let end = name_end(bytes, at + 1);
                    self.anchor(&bytes[at + 1..end], at, owner)?;
                    at = end;
                }
                b'*' => {
                    let end = name_end(bytes, at + 1);
                    self.alias(&bytes[at + 1..end])?;
                    at = end;
                }
                b'!' => at = name_end(bytes, at),
                b'[' | b'{' => return self.flow_text(bytes, at),
                b'|' | b'>' => {
                    self.block_scalar = Some(match owner {
                        Owner::Block(col) => col,
                        _ => 0,
                    });
                    return Ok(());
                }
                b'"' | b'\'' => match Self::quoted_end(bytes, at + 1, b) {
                    None => {
                        self.quote = Some(b);
                        return Ok(());
                    }
                    Some(end) => at = self.after_scalar(bytes, end, &mut owner, at)?,
                },
                _ => {
                    let mut end = at;
                    while end < bytes.len() {
                        let c = bytes[end];
                        let followed_by_space =
                            bytes.get(end + 1).is_none_or(|&n| n == b' ' || n == b'\t');
                        if (c == b':' && followed_by_space)
                            || (c == b'#' && end > at && bytes[end - 1] == b' ')
                        {
                            break;
                        }
                        end += 1;
                    }
                    at = self.after_scalar(bytes, end, &mut owner, at)?;
                }
            }
        }
    }

    /// After a scalar that started at `start` and ends at `end`: a `:`
    /// there makes it a key (a block level at its column, owning the value
    /// that follows); returns where to go on.
    fn after_scalar(
        &mut self,
        bytes: &[u8],
        mut end: usize,
        owner: &mut Owner,
        start: usize,
    ) -> Result<usize, PrescanError> {
        while end < bytes.len() && bytes[end] == b' ' {
            end += 1;
        }
        if bytes.get(end) == Some(&b':')
            && bytes.get(end + 1).is_none_or(|&n| n == b' ' || n == b'\t')
        {
            self.push_indent(start)?;
            *owner = Owner::Block(start);
            return Ok(end + 1);
        }
        Ok(if bytes.get(end) == Some(&b'#') {
            bytes.len()
        } else {
            end.max(start + 1)
        })
    }

    /// A line from `at` inside (or opening) flow collections.
    fn flow_text(&mut self, bytes: &[u8], mut at: usize) -> Result<(), PrescanError> {
        let mut token_start = true;
        while at < bytes.len() {
            let b = bytes[at];
            let starts = token_start;
            token_start = matches!(b, b' ' | b'\t' | b',' | b'[' | b'{' | b':');
            match b {
                b'[' | b'{' => {
                    self.flow += 1;
                    self.depth_check()?;
                }
                b']' | b'}' => {
                    let depth = self.flow;
                    self.close_anchors(self.start + at, |owner| owner == Owner::Flow(depth));
                    self.flow = self.flow.saturating_sub(1);
                    if self.flow == 0 {
                        return self.block_text(bytes, at + 1, Owner::Root);
                    }
                }
                b',' => {
                    let depth = self.flow;
                    self.close_anchors(self.start + at, |owner| owner == Owner::Flow(depth));
                }
                b'#' if starts => return Ok(()),
                b'"' | b'\'' if starts => match Self::quoted_end(bytes, at + 1, b) {
                    None => {
                        self.quote = Some(b);
                        return Ok(());
                    }
                    Some(end) => {
                        at = end;
                        continue;
                    }
                },
                b'&' if starts => {
                    let end = name_end(bytes, at + 1);
                    self.anchor(&bytes[at + 1..end], at, Owner::Flow(self.flow))?;
                    at = end;
                    continue;
                }
                b'*' if starts => {
                    let end = name_end(bytes, at + 1);
                    self.alias(&bytes[at + 1..end])?;
                    at = end;
                    continue;
                }
                _ => {}
            }
            at += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> PrescanError {
        check(text).expect_err("refused")
    }

    #[test]
    fn the_shipped_config_passes() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/shardgate.yaml");
        let text = std::fs::read_to_string(&path).expect("config");
        assert_eq!(check(&text), Ok(()));
    }

    #[test]
    fn ordinary_yaml_passes() {
        let text = "\
listen: 127.0.0.1:6033 # a comment [[[[
users: [{ name: app, password: 'p[[[{{' }, { name: b, password: \"x\\\"[[\" }]
backend: &b
  user: shardgate
  password: a[b{c
fleets:
  main:
    database: db{:05}
    hosts:
      - { range: [0, 2047], master: 127.0.0.1:3307 }
      - range: [2048, 4095]
        master: 127.0.0.1:3308
note: |
  [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[
      {{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{
operations: *b
";
        assert_eq!(check(text), Ok(()));
    }

    #[test]
    fn deep_flow_nesting_is_refused_on_its_line() {
        let n = 200_000;
        let text = format!("listen: x\nusers: {}{}\n", "[".repeat(n), "]".repeat(n));
        let started = std::time::Instant::now();
        let error = refused(&text);
        assert!(started.elapsed() < std::time::Duration::from_millis(500));
        assert_eq!(error.line, 2);
        assert!(
            error.message.contains("nested more than 32 deep"),
            "{error}"
        );
        let ok = format!("a: {}{}\n", "[".repeat(30), "]".repeat(30));
        assert_eq!(check(&ok), Ok(()));
        let spread = format!("a: {}\n{}\n", "{ b: ".repeat(33), "}".repeat(33));
        assert!(refused(&spread).message.contains("nested"));
    }

    #[test]
    fn deep_block_nesting_is_refused() {
        let compact = format!("a:\n  {}x\n", "- ".repeat(40));
        assert!(refused(&compact).message.contains("nested more than 32"));
        let mut indented = String::new();
        for level in 0..40 {
            indented.push_str(&" ".repeat(level));
            indented.push_str("k:\n");
        }
        let error = refused(&indented);
        assert_eq!(error.line, 33);
        let mut shallow = String::new();
        for level in 0..20 {
            shallow.push_str(&" ".repeat(level));
            shallow.push_str("k:\n");
        }
        shallow.push_str("back: 1\n");
        assert_eq!(check(&shallow), Ok(()));
    }

    #[test]
    fn alias_replay_is_bounded() {
        let hosts = vec!["{range: [0, 0], master: 'a:1'}"; 300].join(", ");
        let mut bomb = format!("fleets:\n  f0: {{hosts: &h [{hosts}]}}\n");
        for i in 1..1000 {
            bomb.push_str(&format!("  f{i}: {{hosts: *h}}\n"));
        }
        let error = refused(&bomb);
        assert!(error.message.contains("replay more than"), "{error}");
        let mut laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n".to_owned();
        for (name, previous) in ["b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f", "g"])
        {
            laughs.push_str(&format!(
                "{name}: &{name} [{}]\n",
                vec![format!("*{previous}"); 10].join(", ")
            ));
        }
        assert!(refused(&laughs).message.contains("replay"));
        let block = "base: &b\n  user: u\n  password: p\nx: *b\ny: *b\n";
        assert_eq!(check(block), Ok(()));
        let recursive = "a: &a [1, *a]\n";
        assert!(refused(recursive)
            .message
            .contains("refers to the node it is in"));
    }

    #[test]
    fn size_is_bounded() {
        let text = format!("a: '{}'\n", "x".repeat(MAX_DOCUMENT_BYTES));
        let error = refused(&text);
        assert_eq!(error.line, 0);
        assert!(error.message.contains("more than 4194304 bytes"), "{error}");
    }
}
