//! Typed calls into the transforms' WIT interfaces.
//!
//! Invariants:
//! - Every WIT function the host calls is one row of the table in `functions`: its transform,
//!   its WIT name, its parameter and result types, and the [`Call`] it answers. The row is the
//!   only place that spells them; the typed function (`functions::serialize`, ...), the arm of
//!   [`bind`] that maps the call onto it and the load-time type check are generated from it
//!   (the generator is `table`).
//! - The records cross the boundary as the plain types of `devin-bridge-types` themselves: its
//!   `wasmtime` feature derives wasmtime's `ComponentType`, `Lift` and `Lower` on them. There is
//!   no generated twin of a record on the host and no conversion.
//! - A component is type-checked once, when it loads ([`TypedPre::new`]): every function of its
//!   transform's rows is looked up, with the row's types, on one scratch instance. A call then
//!   looks up only the function it runs, by the export index found at load time.
//! - A failure a component answers has its status checked on the way out
//!   (`status::checked_failure`): a component cannot make the host answer a success status
//!   with an error body.
//! - A typed function refuses an instance of another transform (an interface error, never an
//!   answer).

use std::sync::Arc;

use devin_bridge_calls::Answer;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{
    ComponentExportIndex, ComponentNamedList, InstancePre, Lift, Lower, TypedFunc,
};
use wasmtime::Store;

use super::runtime::CallState;
use super::TransformKind;

pub(crate) mod functions;
pub(crate) mod reply;
mod table;

pub(crate) use functions::bind;

/// The WIT package every transform's interface belongs to, with its version.
const PACKAGE: &str = "devin-bridge:transforms";
const VERSION: &str = "0.1.0";

/// A call's store; every typed function runs in one.
pub(crate) type CallStore = Store<CallState>;

/// A component pre-instantiated against the host's linker, with its exports type-checked.
///
/// A fresh instance serves each call, so what instantiation costs is paid per call: the type
/// check of the whole interface runs once, here, and a call looks up only the function it runs.
#[derive(Clone)]
pub(crate) struct TypedPre {
    kind: TransformKind,
    pre: InstancePre<CallState>,
    functions: Arc<Functions>,
}

/// The export index of each function of a transform's interface, by WIT name.
type Functions = Vec<(String, ComponentExportIndex)>;

impl TypedPre {
    /// Finds the export index of each function of `kind`'s interface, and checks on one scratch
    /// instance in `store` that every function of `kind`'s rows is exported with the row's
    /// types.
    pub(crate) fn new(
        kind: TransformKind,
        pre: InstancePre<CallState>,
        store: &mut Store<CallState>,
    ) -> Result<Self, Rejected> {
        let component = pre.component();
        let engine = store.engine();
        let interface_name = format!("{PACKAGE}/{}@{VERSION}", kind.name());
        let mut functions = Functions::new();
        let mut exported = false;
        for (name, item) in component.component_type().exports(engine) {
            let ComponentItem::ComponentInstance(interface) = item.ty else {
                continue;
            };
            if name != interface_name {
                continue;
            }
            let Some(interface_index) = component.get_export_index(None, name) else {
                continue;
            };
            exported = true;
            for (function, item) in interface.exports(engine) {
                if !matches!(item.ty, ComponentItem::ComponentFunc(_)) {
                    continue;
                }
                if let Some(index) = component.get_export_index(Some(&interface_index), function) {
                    functions.push((function.to_owned(), index));
                }
            }
        }
        if !exported {
            return Err(Rejected::Interface(wasmtime::Error::msg(format!(
                "the component exports no `{interface_name}` instance"
            ))));
        }
        let typed = Self {
            kind,
            functions: Arc::new(functions),
            pre,
        };
        let scratch = typed.instantiate(&mut *store).map_err(Rejected::Instance)?;
        functions::check(kind, &scratch, store).map_err(Rejected::Interface)?;
        Ok(typed)
    }

    pub(crate) fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Instance> {
        Ok(Instance {
            kind: self.kind,
            instance: self.pre.instantiate(store)?,
            functions: self.functions.clone(),
        })
    }
}

/// Why a component was refused when it loaded.
pub(crate) enum Rejected {
    /// It could not be instantiated at all.
    Instance(wasmtime::Error),
    /// Its exports are not the transform's interface.
    Interface(wasmtime::Error),
}

/// A live instance of one transform (a fresh one per call in production).
pub struct Instance {
    kind: TransformKind,
    instance: wasmtime::component::Instance,
    functions: Arc<Functions>,
}

impl Instance {
    /// The exported function `name` of the transform's interface, type-checked as `P -> R`.
    fn function<P, R>(&self, store: &mut CallStore, name: &str) -> wasmtime::Result<TypedFunc<P, R>>
    where
        P: ComponentNamedList + Lower,
        R: ComponentNamedList + Lift,
    {
        let index = self
            .functions
            .iter()
            .find_map(|(function, index)| (function == name).then_some(index))
            .ok_or_else(|| wasmtime::Error::msg(format!("the component exports no `{name}`")))?;
        self.instance.get_typed_func::<P, R>(store, index)
    }

    /// Calls the exported function `name` of transform `kind` with `params` (its results, as a
    /// tuple); an instance of another transform is an error.
    fn call<P, R>(
        &self,
        store: &mut CallStore,
        kind: TransformKind,
        name: &str,
        params: P,
    ) -> wasmtime::Result<R>
    where
        P: ComponentNamedList + Lower,
        R: ComponentNamedList + Lift,
    {
        if self.kind != kind {
            return Err(wasmtime::Error::msg(format!(
                "`{name}` is a {kind} function, called on a {} instance",
                self.kind
            )));
        }
        self.function::<P, R>(store, name)?.call(store, params)
    }
}

/// A call bound to the transform that answers it: the transform, and the typed function to run
/// on an instance of it.
pub(crate) struct Bound<'a> {
    pub(crate) kind: TransformKind,
    run: Job<'a>,
}

type Job<'a> = Box<dyn FnOnce(&Instance, &mut CallStore) -> wasmtime::Result<Answer> + 'a>;

impl<'a> Bound<'a> {
    fn new(
        kind: TransformKind,
        run: impl FnOnce(&Instance, &mut CallStore) -> wasmtime::Result<Answer> + 'a,
    ) -> Self {
        Self {
            kind,
            run: Box::new(run),
        }
    }

    /// Runs the call on `instance`, which must be of `self.kind` (an instance of another
    /// transform is an error, not an answer).
    pub(crate) fn run(
        self,
        instance: &Instance,
        store: &mut CallStore,
    ) -> wasmtime::Result<Answer> {
        (self.run)(instance, store)
    }
}
