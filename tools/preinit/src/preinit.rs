//! Pre-initialisation of the transform components. Each one is instantiated once at build time,
//! given one representative call (its warm-up), and snapshotted with `wasmtime-wizer` into a new
//! component whose linear memory and globals start where that instance ended.
//!
//! Why: the bridge runs every transform call in a fresh instance. A fresh instance of the plain
//! build starts with an empty heap, so its allocator grows linear memory during the call. Each
//! growth is a host call that changes page protections, and the pooling allocator changes them
//! back before the slot's next instance; that second `mprotect` interrupts every core to flush
//! its TLB. The snapshot already holds, free, the heap a call of the warm-up's size needs, and
//! whatever the component sets up lazily on its first call. A fresh instance of it starts where
//! a warm one would, and a call of that size makes no protection change at all.
//!
//! What the snapshot carries: the allocator's state, its freed heap (which still holds bytes of
//! the warm-up call: fixtures of this repository, nothing secret) and the globals (the stack
//! pointer is back at its base once the call has returned). Nothing of a run-time call survives
//! it: every run-time call still gets a fresh instance of the snapshot.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use wasmtime::component::{Component, Func, Instance, Lift, Linker, Val, WasmList};
use wasmtime::{Config, Engine, Store};
use wasmtime_wizer::{ComponentInstanceState, Wizer};

/// The call that pre-initialises a component: an exported function of one of its interfaces.
pub(crate) struct WarmUp {
    /// The exported interface, e.g. `devin-bridge:transforms/serializer@0.1.0`.
    pub interface: &'static str,
    pub function: &'static str,
    pub args: Vec<Val>,
}

/// A file of the repository, as text.
fn repository_file(root: &Path, relative: &str) -> Result<String> {
    let path = root.join(relative);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// The Claude-Code-sized request the benchmarks and tests use (79 KB, 21 tools).
fn claude_code_request(root: &Path) -> Result<String> {
    repository_file(root, "tests/fixtures/requests/claude-code.json")
}

/// The serializer turns the Claude-Code-sized request into a prompt.
pub(crate) fn serializer_warm_up(root: &Path) -> Result<WarmUp> {
    Ok(WarmUp {
        interface: "devin-bridge:transforms/serializer@0.1.0",
        function: "serialize",
        args: vec![Val::String(claude_code_request(root)?)],
    })
}

/// The envelope parses a `Bash` call against that request's 21 tools (and so compiles and runs
/// a JSON-Schema validator).
pub(crate) fn envelope_warm_up(root: &Path) -> Result<WarmUp> {
    let request: serde_json::Value = serde_json::from_str(&claude_code_request(root)?)?;
    let tools = request
        .get("tools")
        .context("the Claude Code fixture has no tools")?
        .to_string();
    // As models write it: a sentence, then the envelope.
    let output = r#"Let me run the tests.
<tool>{"name":"Bash","arguments":{"command":"npm test","description":"Run the tests"}}</tool>"#;
    Ok(WarmUp {
        interface: "devin-bridge:transforms/envelope@0.1.0",
        function: "parse",
        args: vec![
            Val::String(output.to_owned()),
            Val::String(tools),
            Val::String("0123456789abcdef01234567".to_owned()),
            // The bridge's default `[agent] max_tool_calls`.
            Val::U32(8),
        ],
    })
}

/// The SSE renderer renders a tool-call reply (a sentence, then the call) as a whole stream.
pub(crate) fn sse_warm_up(_root: &Path) -> Result<WarmUp> {
    let usage = || {
        Val::Record(vec![
            ("input-tokens".to_owned(), Val::U32(20_000)),
            ("output-tokens".to_owned(), Val::U32(40)),
            ("cache-read-input-tokens".to_owned(), Val::U32(0)),
            ("cache-creation-input-tokens".to_owned(), Val::U32(0)),
        ])
    };
    let head = Val::Record(vec![
        ("id".to_owned(), Val::String("msg_warm_up".to_owned())),
        (
            "model".to_owned(),
            Val::String("devin-cli-agentic/swe-1-7".to_owned()),
        ),
        ("usage".to_owned(), usage()),
    ]);
    let call = Val::Record(vec![
        ("id".to_owned(), Val::String("toolu_warm_up".to_owned())),
        ("name".to_owned(), Val::String("Bash".to_owned())),
        (
            "input".to_owned(),
            Val::String(r#"{"command":"npm test","description":"Run the tests"}"#.to_owned()),
        ),
    ]);
    Ok(WarmUp {
        interface: "devin-bridge:transforms/sse@0.1.0",
        function: "render-stream",
        args: vec![
            head,
            Val::Variant(
                "tools".to_owned(),
                Some(Box::new(Val::List(vec![
                    Val::Variant(
                        "text".to_owned(),
                        Some(Box::new(Val::String("Let me run the tests.".to_owned()))),
                    ),
                    Val::Variant("call".to_owned(), Some(Box::new(call))),
                ]))),
            ),
            // No safeguard verdicts: the common case.
            Val::Option(None),
        ],
    })
}

/// The safeguard judge judges the calls of an ordinary turn (a shell command and a read)
/// against a small classifier context, after a short conversation (an edit and a command).
pub(crate) fn safeguard_warm_up(_root: &Path) -> Result<WarmUp> {
    let call = |id: &str, name: &str, input: &str| {
        Val::Record(vec![
            ("id".to_owned(), Val::String(id.to_owned())),
            ("name".to_owned(), Val::String(name.to_owned())),
            ("input".to_owned(), Val::String(input.to_owned())),
        ])
    };
    let context = r#"{"v":1,"permission_mode":"auto","live_cwd":"/work/project","home_dir":"/home/user","trusted_directories":{"primary":{"path":"/work/project"},"additional":[]}}"#;
    Ok(WarmUp {
        interface: "devin-bridge:transforms/safeguard@0.1.0",
        function: "judge",
        args: vec![
            Val::List(vec![
                call("toolu_1", "Bash", r#"{"command":"git status && npm test"}"#),
                call(
                    "toolu_2",
                    "Read",
                    r#"{"file_path":"/work/project/src/main.rs"}"#,
                ),
            ]),
            Val::String(context.to_owned()),
            Val::List(vec![
                call(
                    "toolu_0",
                    "Edit",
                    r#"{"file_path":"/work/project/src/main.rs"}"#,
                ),
                call("toolu_00", "Bash", r#"{"command":"cargo fmt > fmt.log"}"#),
            ]),
        ],
    })
}

/// The model-alias validator checks the default model against the shipped catalog.
pub(crate) fn model_alias_warm_up(root: &Path) -> Result<WarmUp> {
    let catalog = repository_file(root, "policies/models.json")?;
    Ok(WarmUp {
        interface: "devin-bridge:transforms/model-alias@0.1.0",
        function: "validate",
        args: vec![
            Val::String("devin-cli-agentic/swe-1-7".to_owned()),
            Val::String(catalog),
        ],
    })
}

/// Runs `warm_up` in an instance of `component` and returns the snapshot of that instance.
/// Fails when the warm-up traps or answers with a failure: a snapshot of an instance that took
/// an error path would not hold the heap of a real call.
pub(crate) fn preinitialize(component: &[u8], warm_up: &WarmUp) -> Result<Vec<u8>> {
    let wizer = Wizer::new();
    let (context, instrumented) = wizer
        .instrument_component(component)
        .map_err(|error| anyhow!("instrumenting the component: {error:#}"))?;
    let mut config = Config::new();
    config.wasm_component_model(true);
    let engine = Engine::new(&config).map_err(|error| anyhow!("{error:#}"))?;
    let compiled = Component::new(&engine, &instrumented)
        .map_err(|error| anyhow!("compiling the instrumented component: {error:#}"))?;
    let mut store = Store::new(&engine, ());
    let instance = Linker::new(&engine)
        .instantiate(&mut store, &compiled)
        .map_err(|error| anyhow!("instantiating the instrumented component: {error:#}"))?;

    let func = exported_func(&mut store, &instance, warm_up.interface, warm_up.function)?;
    let mut results = vec![Val::Bool(false); func.ty(&store).results().len()];
    func.call(&mut store, &warm_up.args, &mut results)
        .map_err(|error| anyhow!("the warm-up call trapped: {error:#}"))?;
    if let Some(Val::Result(Err(failure))) = results.first() {
        bail!("the warm-up call answered with a failure: {failure:?}");
    }

    let mut state = Snapshotting {
        store: &mut store,
        instance,
        error: None,
    };
    let snapshot = pollster::block_on(wizer.snapshot_component(&context, &mut state))
        .map_err(|error| anyhow!("snapshotting the instance: {error:#}"))?;
    if let Some(error) = state.error {
        bail!("reading the instance's state: {error}");
    }
    Ok(snapshot)
}

fn exported_func(
    store: &mut Store<()>,
    instance: &Instance,
    interface: &str,
    function: &str,
) -> Result<Func> {
    let (_, interface_index) = instance
        .get_export(&mut *store, None, interface)
        .with_context(|| format!("the component exports no `{interface}`"))?;
    let (_, function_index) = instance
        .get_export(&mut *store, Some(&interface_index), function)
        .with_context(|| format!("`{interface}` exports no `{function}`"))?;
    instance
        .get_func(&mut *store, function_index)
        .with_context(|| format!("`{interface}#{function}` is not a function"))
}

/// Wizer's view of the live instance: it reads memories and globals through accessor functions
/// its instrumentation exported. The trait has no error channel, so the first error is kept
/// here (and reported after the snapshot) while the accessors answer with empty values.
struct Snapshotting<'a> {
    store: &'a mut Store<()>,
    instance: Instance,
    error: Option<String>,
}

impl Snapshotting<'_> {
    fn call<R: Lift + 'static, T>(
        &mut self,
        interface: &str,
        function: &str,
        read: impl FnOnce(&Store<()>, R) -> T,
    ) -> Option<T> {
        let result =
            exported_func(self.store, &self.instance, interface, function).and_then(|func| {
                let typed = func
                    .typed::<(), (R,)>(&*self.store)
                    .map_err(|error| anyhow!("{error:#}"))?;
                let (value,) = typed
                    .call(&mut *self.store, ())
                    .map_err(|error| anyhow!("{error:#}"))?;
                Ok(value)
            });
        match result {
            Ok(value) => Some(read(self.store, value)),
            Err(error) => {
                self.error
                    .get_or_insert_with(|| format!("{interface}#{function}: {error:#}"));
                None
            }
        }
    }

    fn number<R: Lift + Default + Copy + 'static>(&mut self, interface: &str, function: &str) -> R {
        self.call(interface, function, |_, value: R| value)
            .unwrap_or_default()
    }
}

impl ComponentInstanceState for Snapshotting<'_> {
    async fn call_func_ret_list_u8(
        &mut self,
        interface: &str,
        function: &str,
        contents: impl FnOnce(&[u8]) + Send,
    ) {
        let bytes = self.call(interface, function, |store, list: WasmList<u8>| {
            list.as_le_slice(store).to_vec()
        });
        contents(bytes.as_deref().unwrap_or_default());
    }

    async fn call_func_ret_s32(&mut self, interface: &str, function: &str) -> i32 {
        self.number(interface, function)
    }

    async fn call_func_ret_s64(&mut self, interface: &str, function: &str) -> i64 {
        self.number(interface, function)
    }

    async fn call_func_ret_f32(&mut self, interface: &str, function: &str) -> u32 {
        self.number::<f32>(interface, function).to_bits()
    }

    async fn call_func_ret_f64(&mut self, interface: &str, function: &str) -> u64 {
        self.number::<f64>(interface, function).to_bits()
    }
}
