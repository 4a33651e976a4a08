//! `when:` predicates (ratelimitd extension): a CEL expression on a descriptor entry or on a
//! limit, compiled once at load, that decides per request whether that entry matches or that limit
//! applies. Variables: `descriptor` (the request descriptor's entries, a map key → value),
//! `domain` and `hits_addend` (the hits the descriptor asks for).
//!
//! Cost is bounded by construction, not by a budget: an expression is at most [`MAX_LEN`] bytes,
//! [`MAX_NODES`] syntax nodes and [`MAX_DEPTH`] levels deep; no comprehension (`exists`, `all`,
//! `map`, `filter`) may sit inside another, so the work of one evaluation is at most its nodes
//! times the descriptor's entries (themselves capped per request); the functions are CEL's
//! standard ones without `matches` (a pattern compiled per evaluation: `value_regex` is the
//! linear-time, compile-once way) and without timestamps. Every identifier and function is checked
//! at load, so a typo is a load error with its position, not a run-time one.

use std::sync::{Arc, LazyLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::{Context, Env, Program, Value};

use super::compiled::{EntryRef, FailureMode};
use super::error::Sink;

/// The longest expression accepted, in bytes.
pub const MAX_LEN: usize = 1024;
/// The most syntax nodes (literals, identifiers, calls, selections...) an expression may have.
pub const MAX_NODES: usize = 256;
/// How deeply an expression may nest: open brackets plus conditionals (`?`), which never close,
/// as written; and its syntax tree (`a + b + c` is two levels), as parsed. Evaluation recurses
/// once per level, so this bounds the stack a decision needs.
pub const MAX_DEPTH: u16 = 16;
/// How deep the syntax tree may be: a debug build's evaluation takes some 40 KiB of stack per
/// level, so 16 levels stay well inside a runtime worker's 2 MiB.
pub const MAX_TREE_DEPTH: usize = 16;

/// The variables an expression may name.
const VARIABLES: [&str; 3] = ["descriptor", "domain", "hits_addend"];

/// The functions and operators an expression may call: CEL's standard ones without `matches` and
/// the timestamp and duration functions (left out of the build).
const FUNCTIONS: [&str; 33] = [
    "_?_:_",
    "_&&_",
    "_||_",
    "!_",
    "_-_",
    "_+_",
    "_*_",
    "_/_",
    "_%_",
    "_==_",
    "_!=_",
    "_>=_",
    "_<=_",
    "_>_",
    "_<_",
    "-_",
    "_[_]",
    "_[?_]",
    "_?._",
    "@in",
    "@not_strictly_false",
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "string",
    "int",
    "uint",
    "double",
    "bool",
    "bytes",
    "type",
    "dyn",
];

/// The CEL environment every predicate is compiled and run in: the standard functions and macros.
static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// One compiled `when:` expression.
pub struct Predicate {
    /// The expression as written.
    pub source: String,
    program: Program,
    /// The `failure_mode` of the limit it guards (for an entry's predicate: the limit on that
    /// entry's node, if any); `None` = the service's `DEFAULT_FAILURE_MODE`.
    pub failure_mode: Option<FailureMode>,
}

impl std::fmt::Debug for Predicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Predicate")
            .field("source", &self.source)
            .field("failure_mode", &self.failure_mode)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Predicate {
    fn eq(&self, other: &Predicate) -> bool {
        self.source == other.source && self.failure_mode == other.failure_mode
    }
}

/// What a predicate answered for one request, after its failure mode when it could not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The expression held (or failed under `failure_mode: deny` or `local`: the rule applies).
    Holds,
    /// The expression did not hold (or failed under `failure_mode: allow`: the rule is skipped).
    Fails,
    /// The expression failed under `failure_mode: error`: the request fails.
    Error,
}

/// The variables of one request descriptor, built on the first predicate that needs them and
/// shared by the others of that descriptor.
pub struct Scope {
    context: Context<'static, 'static>,
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope").finish_non_exhaustive()
    }
}

impl Scope {
    /// The variables for a descriptor of `entries` in `domain` asking for `hits_addend` hits. A
    /// key sent twice holds its last value.
    pub fn new<E: EntryRef>(entries: &[E], domain: &str, hits_addend: u64) -> Scope {
        let mut context = Context::with_env(Arc::clone(&ENV));
        let map: std::collections::HashMap<String, String> = entries
            .iter()
            .map(|e| (e.key().to_owned(), e.value().to_owned()))
            .collect();
        context.add_variable_from_value("descriptor", map);
        context.add_variable_from_value("domain", domain.to_owned());
        // CEL's integers are signed: a larger count (no real request) reads as the largest.
        let hits = i64::try_from(hits_addend).unwrap_or(i64::MAX);
        context.add_variable_from_value("hits_addend", hits);
        Scope { context }
    }
}

/// A predicate's result and, when it could not answer, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// What applies.
    pub verdict: Verdict,
    /// The run-time error, if the expression failed (counted, and shown by explain).
    pub error: Option<String>,
}

impl Predicate {
    /// Evaluates against `scope`; a failure answers by `failure_mode`, else by `default_mode`.
    pub fn evaluate(&self, scope: &Scope, default_mode: FailureMode) -> Evaluation {
        let error = match self.program.execute(&scope.context) {
            Ok(Value::Bool(true)) => return held(Verdict::Holds),
            Ok(Value::Bool(false)) => return held(Verdict::Fails),
            Ok(other) => format!("evaluated to {other:?}, not a bool"),
            Err(e) => e.to_string(),
        };
        let verdict = match self.failure_mode.unwrap_or(default_mode) {
            FailureMode::Allow => Verdict::Fails,
            FailureMode::Deny | FailureMode::Local => Verdict::Holds,
            FailureMode::Error => Verdict::Error,
        };
        Evaluation {
            verdict,
            error: Some(error),
        }
    }
}

fn held(verdict: Verdict) -> Evaluation {
    Evaluation {
        verdict,
        error: None,
    }
}

/// Compiles the `when:` at YAML path `at`, reporting every problem there with its position in the
/// expression; `None` when refused.
pub(crate) fn check(
    source: &str,
    at: &str,
    failure_mode: Option<FailureMode>,
    sink: &mut Sink<'_>,
) -> Option<Predicate> {
    let refuse = |sink: &mut Sink<'_>, why: String| {
        sink.push(at, format!("invalid when '{}': {why}", shorten(source)));
        None
    };
    if source.trim().is_empty() {
        return refuse(
            sink,
            "empty expression (write a CEL condition, e.g. `descriptor.tenant == \"acme\"`)".into(),
        );
    }
    if source.len() > MAX_LEN {
        return refuse(
            sink,
            format!(
                "the expression is {} bytes; at most {MAX_LEN} are accepted",
                source.len()
            ),
        );
    }
    if let Some(at) = too_deep(source) {
        let why = format!(
            "the expression nests more than {MAX_DEPTH} levels (brackets and conditionals){}",
            position_of(source, at)
        );
        return refuse(sink, why);
    }
    let program = match parse(source) {
        Ok(p) => p,
        Err(why) => return refuse(sink, why),
    };
    let mut walk = Walk {
        nodes: 0,
        depth: 0,
        problem: None,
        scopes: Vec::new(),
    };
    walk.visit(program.expression(), 0);
    if let Some((id, why)) = walk.problem {
        let position = program
            .source_info()
            .offset_for(id)
            .map(|(start, _)| position_of(source, start as usize))
            .unwrap_or_default();
        return refuse(sink, format!("{why}{position}"));
    }
    Some(Predicate {
        source: source.to_owned(),
        program,
        failure_mode,
    })
}

/// The stack a parse runs on. CEL's generated parser recurses through a dozen rules per bracket,
/// with frames large enough in a debug build that a 2 MiB thread (a test's, a runtime worker's)
/// overflows at a few levels; a parse runs once per expression at load, on a thread of its own.
const PARSE_STACK: usize = 64 << 20;

/// Compiles `source`; the first error with its position when it does not parse.
fn parse(source: &str) -> Result<Program, String> {
    let source = source.to_owned();
    let parsed = std::thread::Builder::new()
        .name("when-parse".into())
        .stack_size(PARSE_STACK)
        .spawn(move || {
            // The library's own recursion limit too, though `too_deep` already bounds nesting.
            let depth = ENV.parser().max_recursion_depth(MAX_DEPTH * 4);
            if let Err(errors) = depth.parse(&source) {
                return Err(errors.errors.first().map_or_else(
                    || "syntax error".to_owned(),
                    |e| {
                        // The parser's positions are 1-based, line and column.
                        let (line, column) = (e.pos.0.max(1), e.pos.1.max(1));
                        format!("{} at line {line}, column {column}", e.msg)
                    },
                ));
            }
            ENV.compile(&source)
                .map_err(|e| e.to_string().replace('\n', " "))
        });
    match parsed.map(std::thread::JoinHandle::join) {
        Ok(Ok(result)) => result,
        Ok(Err(_)) | Err(_) => Err("the expression could not be parsed".to_owned()),
    }
}

/// The character offset where `source` first nests deeper than [`MAX_DEPTH`], counting open
/// brackets and conditionals (`?`) outside string literals; `None` when it never does.
fn too_deep(source: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in source.chars().enumerate() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' | '?' => {
                depth += 1;
                if depth > usize::from(MAX_DEPTH) {
                    return Some(i);
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// ` at line L, column C` for a character offset into `source`.
fn position_of(source: &str, offset: usize) -> String {
    let mut line = 1;
    let mut column = 1;
    for c in source.chars().take(offset) {
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    format!(" at line {line}, column {column}")
}

/// The expression as quoted in an error: its first 80 characters.
fn shorten(source: &str) -> String {
    let mut s: String = source.chars().take(80).collect();
    if s.len() < source.len() {
        s.push('…');
    }
    s.replace('\n', " ")
}

/// The load-time walk: counts nodes and checks names and comprehension nesting, keeping the first
/// problem with the id of the node it is at.
struct Walk<'a> {
    nodes: usize,
    depth: usize,
    problem: Option<(u64, String)>,
    /// The variables comprehensions bind, innermost last.
    scopes: Vec<&'a str>,
}

impl<'a> Walk<'a> {
    fn refuse(&mut self, id: u64, why: String) {
        if self.problem.is_none() {
            self.problem = Some((id, why));
        }
    }

    fn visit(&mut self, e: &'a IdedExpr, comprehensions: usize) {
        if self.problem.is_some() {
            return;
        }
        self.depth += 1;
        self.node(e, comprehensions);
        self.depth -= 1;
    }

    fn node(&mut self, e: &'a IdedExpr, comprehensions: usize) {
        if self.depth > MAX_TREE_DEPTH {
            let why = format!(
                "the expression is more than {MAX_TREE_DEPTH} operations deep (split a long chain with parentheses)"
            );
            return self.refuse(e.id, why);
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            let why = format!("the expression has more than {MAX_NODES} parts");
            return self.refuse(e.id, why);
        }
        match &e.expr {
            Expr::Unspecified | Expr::Literal(_) => {}
            Expr::Ident(name) => {
                let known = VARIABLES.contains(&name.as_str())
                    || name.starts_with('@')
                    || self.scopes.contains(&name.as_str());
                if !known {
                    let why = format!(
                        "unknown variable '{name}' (expected descriptor, domain or hits_addend)"
                    );
                    self.refuse(e.id, why);
                }
            }
            Expr::Call(call) => {
                if !FUNCTIONS.contains(&call.func_name.as_str()) {
                    let why = match call.func_name.as_str() {
                        "matches" => "matches() is not available in when (use value_regex on the descriptor entry: compiled once, matched in linear time)".to_owned(),
                        other => format!(
                            "unknown function '{other}' (available: size, contains, startsWith, endsWith, string, int, uint, double, bool, bytes, type, dyn, has, exists, all, exists_one, map, filter and the operators)"
                        ),
                    };
                    return self.refuse(e.id, why);
                }
                if let Some(target) = &call.target {
                    self.visit(target, comprehensions);
                }
                for arg in &call.args {
                    self.visit(arg, comprehensions);
                }
            }
            Expr::Select(select) => self.visit(&select.operand, comprehensions),
            Expr::List(list) => {
                for item in &list.elements {
                    self.visit(item, comprehensions);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        self.visit(&m.key, comprehensions);
                        self.visit(&m.value, comprehensions);
                    }
                }
            }
            Expr::Struct(_) => {
                self.refuse(e.id, "message construction is not available in when".into());
            }
            Expr::Comprehension(c) => {
                if comprehensions > 0 {
                    let why = "a comprehension (exists, all, exists_one, map, filter) inside another is not accepted: its cost would grow with the square of the descriptor".to_owned();
                    return self.refuse(e.id, why);
                }
                self.visit(&c.iter_range, comprehensions);
                self.visit(&c.accu_init, comprehensions);
                let bound = self.scopes.len();
                self.scopes.push(&c.iter_var);
                self.scopes.extend(c.iter_var2.as_deref());
                self.scopes.push(&c.accu_var);
                self.visit(&c.loop_cond, comprehensions + 1);
                self.visit(&c.loop_step, comprehensions + 1);
                self.visit(&c.result, comprehensions + 1);
                self.scopes.truncate(bound);
            }
        }
    }
}

/// What matching asks of the `when:` predicates it meets ([`super::compiled::Domain::lookup_gated`]).
pub trait Gate {
    /// `false` compiles every predicate check out: the path of a domain without `when:`.
    const ACTIVE: bool;
    /// Whether the node or limit guarded by `when` applies to this request.
    fn admits(&mut self, when: &Predicate) -> bool;
}

/// The gate of a domain without predicates: everything applies, and nothing is evaluated.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ungated;

impl Gate for Ungated {
    const ACTIVE: bool = false;
    fn admits(&mut self, _: &Predicate) -> bool {
        true
    }
}

/// The gate of one request descriptor: evaluates predicates against its variables (built on the
/// first one), and keeps what a decision reports: errors, whether one fails the request, and
/// (when asked, for explain) every result.
pub struct Judge<'a, E> {
    entries: &'a [E],
    domain: &'a str,
    hits_addend: u64,
    default_mode: FailureMode,
    scope: Option<Scope>,
    /// Predicates that failed at run time.
    pub errors: u32,
    /// The first failure under `failure_mode: error`, which fails the request.
    pub fatal: Option<String>,
    /// Every evaluation in order, when [`Judge::recording`] asked for them.
    pub results: Option<Vec<(String, Evaluation)>>,
}

impl<E> std::fmt::Debug for Judge<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judge")
            .field("domain", &self.domain)
            .field("errors", &self.errors)
            .field("fatal", &self.fatal)
            .finish_non_exhaustive()
    }
}

impl<'a, E: EntryRef> Judge<'a, E> {
    /// A judge of the descriptor of `entries` in `domain` asking for `hits_addend` hits; a
    /// predicate without its own `failure_mode` fails by `default_mode`.
    pub fn new(
        entries: &'a [E],
        domain: &'a str,
        hits_addend: u64,
        default_mode: FailureMode,
    ) -> Judge<'a, E> {
        Judge {
            entries,
            domain,
            hits_addend,
            default_mode,
            scope: None,
            errors: 0,
            fatal: None,
            results: None,
        }
    }

    /// Keeps every evaluation in [`Judge::results`].
    pub fn recording(mut self) -> Judge<'a, E> {
        self.results = Some(Vec::new());
        self
    }

    /// Evaluates `when` for this descriptor.
    pub fn evaluate(&mut self, when: &Predicate) -> Evaluation {
        let scope = self
            .scope
            .get_or_insert_with(|| Scope::new(self.entries, self.domain, self.hits_addend));
        let evaluation = when.evaluate(scope, self.default_mode);
        if let Some(error) = &evaluation.error {
            self.errors += 1;
            if evaluation.verdict == Verdict::Error && self.fatal.is_none() {
                self.fatal = Some(format!("when '{}' failed: {error}", when.source));
            }
        }
        if let Some(results) = &mut self.results {
            results.push((when.source.clone(), evaluation.clone()));
        }
        evaluation
    }
}

impl<E: EntryRef> Gate for Judge<'_, E> {
    const ACTIVE: bool = true;
    fn admits(&mut self, when: &Predicate) -> bool {
        self.evaluate(when).verdict == Verdict::Holds
    }
}
