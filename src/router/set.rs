//! `SET ...` statements, understood from the tokens rather than the AST:
//! sqlparser does not parse every MySQL SET form, and the statement is
//! forwarded as written anyway, so only the variable names are needed.

use std::ops::Range;

use sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};

use super::plan::{
    Plan, RouteError, SessionAction, SetEvaluation, SqlText, Target, SCHEMA_ENGINES,
};
use super::text::Source;
use crate::topology::Topology;

/// One `name = value` assignment of a SET: the lower-case variable name,
/// the value's tokens, and its position in `significant` tokens (scope word
/// included).
struct Assignment<'t> {
    name: String,
    value: Vec<&'t Token>,
    tokens: Range<usize>,
}

fn unsupported(what: impl Into<String>) -> RouteError {
    RouteError::Unsupported(what.into())
}

fn word(token: &Token) -> Option<&str> {
    match token {
        Token::Word(w) => Some(w.value.as_str()),
        _ => None,
    }
}

fn is_word(token: Option<&&Token>, text: &str) -> bool {
    token
        .and_then(|t| word(t))
        .is_some_and(|w| w.eq_ignore_ascii_case(text))
}

/// Plans a SET statement. `tokens` are the statement's tokens; the first
/// non-whitespace one is `SET`.
///
/// `autocommit` among the assignments is the proxy's to apply: alone it is
/// [`SessionAction::SetAutocommit`]; with other variables, the text sent to
/// the backend is `SET` with the other assignments as written, and the
/// value rides along in [`SessionAction::SetSession`]. `SET TRANSACTION`
/// without a scope is about the next transaction only
/// ([`SessionAction::SetNextTransaction`]).
pub(crate) fn plan(
    tokens: &[TokenWithSpan],
    sql: &[u8],
    src: &Source<'_>,
    topo: &Topology,
) -> Result<Plan, RouteError> {
    let spanned: Vec<&TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .collect();
    // Drop `SET` and a trailing `;`.
    let mut body = spanned.get(1..).unwrap_or_default();
    if let Some((last, rest)) = body.split_last() {
        if last.token == Token::SemiColon {
            body = rest;
        }
    }
    if body.is_empty() {
        return Err(RouteError::Syntax("SET needs a variable to set".to_owned()));
    }
    let significant: Vec<&Token> = body.iter().map(|t| &t.token).collect();
    if is_word(significant.first(), "TRANSACTION") {
        assignments(&significant)?;
        return Ok(Plan::Session(SessionAction::SetNextTransaction {
            sql: sql.into(),
        }));
    }
    let assignments = assignments(&significant)?;
    let evaluates = evaluation(&significant, topo)?;
    let Some(position) = assignments.iter().position(|a| a.name == "autocommit") else {
        let computed = assignments.iter().any(|a| !a.is_literal());
        return Ok(Plan::Session(SessionAction::SetSession {
            variables: assignments.into_iter().map(|a| a.name).collect(),
            sql: sql.into(),
            autocommit: None,
            writes_through_function: false,
            computed,
            evaluates,
        }));
    };
    let on = autocommit_value(&assignments[position].value)?;
    if assignments.len() == 1 {
        return Ok(Plan::Session(SessionAction::SetAutocommit(on)));
    }
    let mut text = b"SET ".to_vec();
    let mut variables = Vec::new();
    let mut computed = false;
    for (i, assignment) in assignments.into_iter().enumerate() {
        if i == position {
            continue;
        }
        computed |= !assignment.is_literal();
        let range = assignment_bytes(body, &assignment.tokens, src)
            .filter(|range| plain_text(tokens, src, range))
            .ok_or_else(|| {
                unsupported(
                    "SET autocommit with other variables written with comments; \
                     set autocommit in a statement of its own",
                )
            })?;
        if !variables.is_empty() {
            text.extend_from_slice(b", ");
        }
        text.extend_from_slice(&sql[range]);
        variables.push(assignment.name);
    }
    Ok(Plan::Session(SessionAction::SetSession {
        variables,
        sql: SqlText::from(text),
        autocommit: Some(on),
        writes_through_function: false,
        computed,
        evaluates,
    }))
}

/// What evaluating a SET's values (its tokens after `SET`) reaches: the
/// shard databases named as `dbNNNNN.` qualifiers (one at most), row locks,
/// function calls and subqueries.
fn evaluation(body: &[&Token], topo: &Topology) -> Result<SetEvaluation, RouteError> {
    let mut shards: Vec<(usize, u32)> = Vec::new();
    let mut evaluates = SetEvaluation::default();
    for (i, token) in body.iter().enumerate() {
        let next = body.get(i + 1);
        match token {
            Token::Word(w) if next == Some(&&Token::Period) => {
                if let Some(shard) = topo.parse_database(&w.value) {
                    if !shards.contains(&shard) {
                        shards.push(shard);
                    }
                }
            }
            Token::Word(w)
                if next == Some(&&Token::LParen) || w.value.eq_ignore_ascii_case("SELECT") =>
            {
                evaluates.calls = true;
            }
            _ => {}
        }
        let pair = |a: &str, b: &str| is_word(Some(token), a) && is_word(next, b);
        if pair("FOR", "UPDATE")
            || pair("FOR", "SHARE")
            || (pair("LOCK", "IN") && is_word(body.get(i + 2), "SHARE"))
        {
            evaluates.locking = true;
        }
    }
    match shards.as_slice() {
        [] => {}
        [(fleet, shard)] => {
            let host = topo.master_of(*fleet, *shard).ok_or_else(|| {
                unsupported(format!("no host serves shard {shard} named in the SET"))
            })?;
            evaluates.shard = Some(Target {
                fleet: *fleet,
                shard: *shard,
                host,
            });
        }
        several => {
            let names: Vec<String> = several
                .iter()
                .filter_map(|(fleet, shard)| {
                    topo.fleets.get(*fleet).map(|f| f.database_name(*shard))
                })
                .collect();
            return Err(unsupported(format!(
                "a SET whose values read several shard databases ({}): a SET runs on one shard; \
                 read each value with its own SET or SELECT",
                names.join(", ")
            )));
        }
    }
    Ok(evaluates)
}

/// Whether `sql` is a `SET` that a session records whole for replay, so
/// that its length alone counts against `limits.max_session_settings_bytes`:
/// `SET` then a user variable (`@u`), a session variable (`@@x`,
/// `@@session.x`, `@@local.x`) or a plain variable name, with nothing but
/// blanks before them, and no `autocommit` anywhere in the text (with it
/// the recorded text is rebuilt from the other assignments). A look at the
/// first bytes (and one pass for `autocommit`), so a SET too long to record
/// is refused before it is analysed; `false` whenever unsure (`SET
/// STATEMENT ... FOR`, `SET TRANSACTION`, `SET GLOBAL`, `SET NAMES`, a
/// comment, ...), and such a statement is analysed as any other.
pub fn records_whole_text(sql: &[u8]) -> bool {
    let blanks = |text: &[u8]| {
        text.iter()
            .take_while(|&&b| super::lex::is_space(b))
            .count()
    };
    let rest = &sql[blanks(sql)..];
    let Some(rest) = rest
        .get(..3)
        .filter(|set| set.eq_ignore_ascii_case(b"SET"))
        .and_then(|_| rest.get(3..))
    else {
        return false;
    };
    let skipped = blanks(rest);
    let rest = &rest[skipped..];
    let variable = match rest {
        _ if skipped == 0 => false,
        [b'@', b'@', tail @ ..] => {
            let scope_end = tail.iter().position(|&b| b == b'.');
            match scope_end.map(|end| &tail[..end]) {
                Some(scope) => {
                    scope.eq_ignore_ascii_case(b"session") || scope.eq_ignore_ascii_case(b"local")
                }
                None => tail.first().is_some_and(|b| b.is_ascii_alphabetic()),
            }
        }
        [b'@', next, ..] => next.is_ascii_alphanumeric() || matches!(next, b'_' | b'$'),
        _ => {
            let word_len = rest
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            let word = &rest[..word_len];
            let next = rest.get(word_len).copied();
            word_len > 0
                && next.is_some_and(|b| super::lex::is_space(b) || b == b'=' || b == b':')
                && ![
                    &b"STATEMENT"[..],
                    b"TRANSACTION",
                    b"GLOBAL",
                    b"PERSIST",
                    b"PERSIST_ONLY",
                    b"SESSION",
                    b"LOCAL",
                    b"PASSWORD",
                    b"ROLE",
                    b"DEFAULT",
                    b"NAMES",
                    b"CHARACTER",
                    b"CHARSET",
                ]
                .iter()
                .any(|keyword| word.eq_ignore_ascii_case(keyword))
        }
    };
    variable
        && !sql
            .windows(b"autocommit".len())
            .any(|w| w.eq_ignore_ascii_case(b"autocommit"))
}

/// Words that call a function without parentheses.
const NILADIC_FUNCTIONS: &[&str] = &[
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "CURRENT_USER",
    "CURRENT_ROLE",
    "LOCALTIME",
    "LOCALTIMESTAMP",
    "UTC_DATE",
    "UTC_TIME",
    "UTC_TIMESTAMP",
];

impl Assignment<'_> {
    /// Whether the assigned value is a literal, the same on every
    /// connection and host (a number, a string, a bare word such as `ON`
    /// or a character set name; `NAMES cs [COLLATE c]`), rather than
    /// computed from the session or the server: a variable, `DEFAULT`, an
    /// expression, a function, `CHARACTER SET` (its collation is the
    /// database's).
    fn is_literal(&self) -> bool {
        let plain_word = |token: &Token| match token {
            Token::Word(w) => {
                w.quote_style.is_none()
                    && !w.value.starts_with('@')
                    && !w.value.eq_ignore_ascii_case("DEFAULT")
                    && !NILADIC_FUNCTIONS
                        .iter()
                        .any(|f| w.value.eq_ignore_ascii_case(f))
            }
            _ => false,
        };
        let literal = |token: &Token| {
            matches!(
                token,
                Token::Number(..)
                    | Token::SingleQuotedString(_)
                    | Token::DoubleQuotedString(_)
                    | Token::NationalStringLiteral(_)
                    | Token::HexStringLiteral(_)
            ) || plain_word(token)
        };
        match (self.name.as_str(), self.value.as_slice()) {
            ("charset", _) => false,
            ("names", [name]) => literal(name),
            ("names", [name, collate, collation]) => {
                literal(name) && is_word(Some(collate), "COLLATE") && literal(collation)
            }
            // SET TRANSACTION's characteristics.
            (_, []) => true,
            (_, [value]) => literal(value),
            (_, [Token::Minus | Token::Plus, Token::Number(..)]) => true,
            _ => false,
        }
    }
}

/// Whether `range` of the original text reads as it is written, so it can
/// be copied into another statement: no comment (executable or not) in it,
/// no byte the lexer's shadow changed.
fn plain_text(tokens: &[TokenWithSpan], src: &Source<'_>, range: &Range<usize>) -> bool {
    let shadow = src.sql.as_bytes().get(range.clone());
    if shadow.is_none() || shadow != src.original.get(range.clone()) {
        return false;
    }
    !tokens.iter().any(|t| {
        matches!(
            t.token,
            Token::Whitespace(
                Whitespace::MultiLineComment(_) | Whitespace::SingleLineComment { .. }
            )
        ) && src
            .range(t.span)
            .is_some_and(|r| r.start < range.end && range.start < r.end)
    })
}

/// The bytes of the original text that assignment `tokens` (positions in
/// `body`) cover.
fn assignment_bytes(
    body: &[&TokenWithSpan],
    tokens: &Range<usize>,
    src: &Source<'_>,
) -> Option<Range<usize>> {
    let first = body.get(tokens.start)?;
    let last = body.get(tokens.end.checked_sub(1)?)?;
    let start = src.offset(first.span.start)?;
    let end = src.offset(last.span.end)?;
    (start < end && end <= src.original.len()).then_some(start..end)
}

/// Variables whose change alters how the server reads the statement's
/// text: refused in `SET STATEMENT ... FOR`, where shardgate would read the
/// wrapped statement with the session's settings.
fn changes_reading(name: &str) -> bool {
    matches!(name, "sql_mode" | "names" | "charset")
        || name.starts_with("character_set_")
        || name.starts_with("collation_")
}

/// For `SET STATEMENT var = value [, ...] FOR <statement>`: the index in
/// `tokens` of the first token after `FOR` (the wrapped statement starts
/// there). `None` for any other SET. Refused: a variable that changes how
/// the text is read (sql_mode, character sets, collations), and a
/// `STATEMENT` with no `FOR`.
pub(crate) fn statement_prefix(tokens: &[TokenWithSpan]) -> Result<Option<usize>, RouteError> {
    let mut significant = tokens
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_) | Token::EOF));
    // `SET`.
    significant.next();
    match significant.next() {
        Some((_, t)) if is_word(Some(&&t.token), "STATEMENT") => {}
        _ => return Ok(None),
    }
    let mut depth = 0usize;
    let mut body = Vec::new();
    for (i, t) in significant {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            Token::Word(w)
                if depth == 0 && w.quote_style.is_none() && w.value.eq_ignore_ascii_case("FOR") =>
            {
                if body.is_empty() {
                    return Err(RouteError::Syntax(
                        "SET STATEMENT needs a variable to set before FOR".to_owned(),
                    ));
                }
                for assignment in assignments(&body)? {
                    if changes_reading(&assignment.name) {
                        return Err(RouteError::Unreadable(format!(
                            "SET STATEMENT {} ... FOR changes how the server reads the statement; \
                             set it with its own SET first",
                            assignment.name
                        )));
                    }
                }
                return Ok(Some(i + 1));
            }
            _ => {}
        }
        body.push(&t.token);
    }
    Err(RouteError::Syntax(
        "SET STATEMENT needs FOR <statement>".to_owned(),
    ))
}

/// Splits the SET body at top-level commas and names each assignment.
fn assignments<'t>(body: &[&'t Token]) -> Result<Vec<Assignment<'t>>, RouteError> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let start = body.len() - rest.len();
        let mut tokens = rest;
        // Scope words.
        match tokens.first().and_then(|t| word(t)) {
            Some(w)
                if ["GLOBAL", "PERSIST", "PERSIST_ONLY"]
                    .iter()
                    .any(|g| w.eq_ignore_ascii_case(g)) =>
            {
                return Err(unsupported(format!(
                    "SET {} changes server-wide settings; change them on the hosts directly",
                    w.to_ascii_uppercase()
                )));
            }
            Some(w) if w.eq_ignore_ascii_case("SESSION") || w.eq_ignore_ascii_case("LOCAL") => {
                tokens = &tokens[1..];
            }
            _ => {}
        }
        // SET [SESSION] TRANSACTION ...: the rest of the statement is its
        // characteristics, commas included.
        if is_word(tokens.first(), "TRANSACTION") {
            if tokens.iter().any(|t| is_word(Some(t), "SERIALIZABLE")) {
                return Err(unsupported(SERIALIZABLE_REFUSED));
            }
            let mut names = Vec::new();
            for pair in tokens.windows(2) {
                if is_word(pair.first(), "ISOLATION") && !names.contains(&"transaction_isolation") {
                    names.push("transaction_isolation");
                }
                if is_word(pair.first(), "READ")
                    && (is_word(pair.get(1), "ONLY") || is_word(pair.get(1), "WRITE"))
                    && !names.contains(&"transaction_read_only")
                {
                    names.push("transaction_read_only");
                }
            }
            if names.is_empty() {
                return Err(RouteError::Syntax(
                    "SET TRANSACTION needs ISOLATION LEVEL or READ ONLY / READ WRITE".to_owned(),
                ));
            }
            out.extend(names.into_iter().map(|n| Assignment {
                name: n.to_owned(),
                value: Vec::new(),
                tokens: start..body.len(),
            }));
            return Ok(out);
        }
        // The assignment runs to the next top-level comma.
        let mut depth = 0usize;
        let mut end = tokens.len();
        for (i, t) in tokens.iter().enumerate() {
            match t {
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                Token::Comma if depth == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let item = &tokens[..end];
        let scope = rest.len() - tokens.len();
        rest = tokens.get(end + 1..).unwrap_or_default();
        let mut named = assignment(item)?;
        named.tokens = start..start + scope + end;
        out.push(named);
    }
    Ok(out)
}

/// Names one assignment: `@@session.x = v`, `@@x = v`, `x = v`, `@u = v`,
/// `` @`u` = v `` (also `@'u'`, `@"u"`), `NAMES cs [COLLATE c]`,
/// `CHARACTER SET cs` / `CHARSET cs`.
fn assignment<'t>(item: &[&'t Token]) -> Result<Assignment<'t>, RouteError> {
    if let Some(assignment) = quoted_user_variable(item) {
        return Ok(assignment);
    }
    let Some(first) = item.first().and_then(|t| word(t)) else {
        return Err(RouteError::Syntax(
            "SET expects a variable name before '='".to_owned(),
        ));
    };
    let upper = first.to_ascii_uppercase();
    match upper.as_str() {
        "NAMES" => {
            return Ok(Assignment {
                name: "names".to_owned(),
                value: item[1..].to_vec(),
                tokens: 0..0,
            })
        }
        "CHARSET" => {
            return Ok(Assignment {
                name: "charset".to_owned(),
                value: item[1..].to_vec(),
                tokens: 0..0,
            })
        }
        "CHARACTER" if is_word(item.get(1), "SET") => {
            return Ok(Assignment {
                name: "charset".to_owned(),
                value: item.get(2..).unwrap_or_default().to_vec(),
                tokens: 0..0,
            })
        }
        "PASSWORD" => return Err(unsupported("SET PASSWORD; change passwords on the hosts")),
        "ROLE" => return Err(unsupported(ROLES_REFUSED)),
        "DEFAULT" if is_word(item.get(1), "ROLE") => return Err(unsupported(ROLES_REFUSED)),
        _ => {}
    }
    // The name is everything before `=` / `:=`.
    let eq = item
        .iter()
        .position(|t| matches!(t, Token::Eq | Token::Assignment))
        .unwrap_or(item.len());
    let mut name = String::new();
    for t in &item[..eq] {
        match t {
            Token::Word(w) => name.push_str(&w.value),
            Token::Period => name.push('.'),
            other => name.push_str(&other.to_string()),
        }
    }
    let mut name = name.to_ascii_lowercase();
    for scope in ["@@session.", "@@local."] {
        if let Some(rest) = name.strip_prefix(scope) {
            name = rest.to_owned();
        }
    }
    if name.starts_with("@@global.")
        || name.starts_with("@@persist.")
        || name.starts_with("@@persist_only.")
    {
        return Err(unsupported(format!(
            "SET {name} changes server-wide settings; change them on the hosts directly"
        )));
    }
    if let Some(rest) = name.strip_prefix("@@") {
        name = rest.to_owned();
    }
    if name.is_empty() {
        return Err(RouteError::Syntax(
            "SET expects a variable name before '='".to_owned(),
        ));
    }
    let value = item.get(eq + 1..).unwrap_or_default();
    refuse_variable(&name, value)?;
    Ok(Assignment {
        name,
        value: value.to_vec(),
        tokens: 0..0,
    })
}

/// `` @`u` = v ``, `@'u' = v`, `@"u" = v`: a user variable whose name is
/// quoted (the tokenizer reads `@` and the quoted name apart). Named `@u`,
/// lower-cased as user variable names compare.
fn quoted_user_variable<'t>(item: &[&'t Token]) -> Option<Assignment<'t>> {
    let [Token::AtSign, quoted, Token::Eq | Token::Assignment, value @ ..] = item else {
        return None;
    };
    let name = match quoted {
        Token::Word(w) if w.quote_style.is_some() => &w.value,
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => s,
        _ => return None,
    };
    // `@''` is a syntax error on a server too.
    if name.is_empty() {
        return None;
    }
    Some(Assignment {
        name: format!("@{}", name.to_lowercase()),
        value: value.to_vec(),
        tokens: 0..0,
    })
}

/// Why SERIALIZABLE is refused: the server makes every plain read of a
/// transaction a locking read, but the proxy runs plain reads outside the
/// transaction, so the shared locks would silently not be taken.
const SERIALIZABLE_REFUSED: &str = "isolation level SERIALIZABLE: plain reads in a transaction run outside it through the proxy, so they would take none of its shared locks; use REPEATABLE READ with SELECT ... FOR SHARE / FOR UPDATE";

/// Why `SET ROLE` and `SET DEFAULT ROLE` are refused.
const ROLES_REFUSED: &str = "SET ROLE / SET DEFAULT ROLE: they change what the proxy's shared data account may do (SET DEFAULT ROLE is stored in mysql.global_priv and replicated); manage roles on the hosts";

/// Session variables a client may not set through the proxy, or only to
/// some values: each would let the session's statements do what the
/// proxy's rules exist to prevent.
///
/// - `completion_type` other than `NO_CHAIN` (0): a COMMIT the proxy sends
///   would open a transaction the proxy does not know of (CHAIN) or close
///   a pooled connection (RELEASE);
/// - `default_storage_engine`, `storage_engine`,
///   `default_tmp_storage_engine` outside [`SCHEMA_ENGINES`]: a CREATE
///   TABLE without ENGINE would make a table of an engine that reaches
///   other tables or servers;
/// - `transaction_isolation` / `tx_isolation` other than the three
///   non-SERIALIZABLE levels ([`SERIALIZABLE_REFUSED`]);
/// - `skip_replication`: writes a replica that filters marked events never
///   sees, lost at the next promotion.
fn refuse_variable(name: &str, value: &[&Token]) -> Result<(), RouteError> {
    let text = match value {
        [Token::Number(n, _)] => Some(n.as_str()),
        [Token::Word(w)] => Some(w.value.as_str()),
        [Token::SingleQuotedString(s)] | [Token::DoubleQuotedString(s)] => Some(s.as_str()),
        _ => None,
    };
    let is =
        |wanted: &[&str]| text.is_some_and(|t| wanted.iter().any(|w| w.eq_ignore_ascii_case(t)));
    match name {
        "completion_type" if !is(&["0", "NO_CHAIN", "DEFAULT"]) => Err(unsupported(
            "SET completion_type other than NO_CHAIN (0): COMMIT AND CHAIN and RELEASE are not supported through the proxy",
        )),
        "default_storage_engine" | "storage_engine" | "default_tmp_storage_engine"
            if !is(&SCHEMA_ENGINES) && !is(&["DEFAULT"]) =>
        {
            Err(unsupported(format!(
                "SET {name} to an engine other than {}: tables made through the proxy stay inside their shard database",
                SCHEMA_ENGINES.join(", ")
            )))
        }
        "transaction_isolation" | "tx_isolation"
            if !is(&[
                "READ-UNCOMMITTED",
                "READ-COMMITTED",
                "REPEATABLE-READ",
                "0",
                "1",
                "2",
                "DEFAULT",
            ]) =>
        {
            Err(unsupported(SERIALIZABLE_REFUSED))
        }
        "skip_replication" => Err(unsupported(
            "SET skip_replication: the session's writes could be filtered out by a replica and lost at its promotion",
        )),
        _ => Ok(()),
    }
}

/// `0`, `1`, `ON`, `OFF`, `TRUE`, `FALSE` (also quoted).
fn autocommit_value(value: &[&Token]) -> Result<bool, RouteError> {
    let text = match value {
        [Token::Number(n, _)] => n.as_str(),
        [Token::Word(w)] => w.value.as_str(),
        [Token::SingleQuotedString(s)] | [Token::DoubleQuotedString(s)] => s.as_str(),
        _ => "",
    };
    match text.to_ascii_uppercase().as_str() {
        // DEFAULT is the global value, which the proxy's servers keep at 1.
        "1" | "ON" | "TRUE" | "DEFAULT" => Ok(true),
        "0" | "OFF" | "FALSE" => Ok(false),
        _ => Err(unsupported(
            "SET autocommit needs 0, 1, ON, OFF or DEFAULT".to_owned(),
        )),
    }
}
