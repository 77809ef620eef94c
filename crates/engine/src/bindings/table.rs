//! The generator of the typed calls: `wit_functions!` turns the table of the transforms' calls
//! (`devin_bridge_types::transform_functions!`, where the form of a row is described) into one
//! typed function per WIT function, the arms of `bind` and the load-time check.
//!
//! The table's rows are the calls of the data form; the engine adds rows of its own first, in
//! `engine { ... }`: the WIT functions no call names directly (the reply stream's resource),
//! each `Transform wit[...];`.
//!
//! For every row with `wit[("name") fn f(params) -> Result ...]` the engine gets
//! `f(instance, store, params) -> wasmtime::Result<Result>`: it refuses an instance of another
//! transform, and a `Result<T, Failure>` answer has its failure's status checked
//! ([`Checked`]). `bind` maps each call onto `f` with the row's arguments, or onto the
//! row's `bind[...]` expression; it is one exhaustive match, so a call without a binding does
//! not compile.
//!
//! Invariant: every row's types are checked against the component's exports when it loads
//! (every row of its transform, see `check`), so a row that disagrees with the WIT refuses
//! every component of its transform, and the golden corpus fails.

use devin_bridge_types::{Failure, SafeguardStatus};
use wasmtime::component::ResourceAny;

use crate::status::checked_failure;
use crate::TransformKind;

/// A component's answer as the host takes it: a failure has its status checked; a value that
/// cannot fail is taken as it is.
pub(crate) trait Checked: Sized {
    fn checked(self, kind: TransformKind) -> Self;
}

impl<T> Checked for Result<T, Failure> {
    fn checked(self, kind: TransformKind) -> Self {
        self.map_err(|failure| checked_failure(kind, failure))
    }
}

/// Results of functions that cannot fail: taken as they are.
macro_rules! infallible {
    ($($type:ty),* $(,)?) => {$(
        impl Checked for $type {
            fn checked(self, _: TransformKind) -> Self {
                self
            }
        }
    )*};
}

infallible!(String, bool, SafeguardStatus, ResourceAny);

/// See the module documentation.
macro_rules! wit_functions {
    (
        engine { $($engine_kind:ident wit[$($engine_wit:tt)*];)* }
        $(
            $(#[$doc:meta])*
            $variant:ident $({ $($(#[$field_attr:meta])* $field:ident: $type:ty),* $(,)? })?
                => $kind:ident $(wit[$($wit:tt)*])? $(bind[$($bind:tt)*])?
                $(guest($answer:expr))? native($native:expr);
        )*
    ) => {
        $($crate::bindings::table::typed_function!($engine_kind [$($engine_wit)*]);)*
        $($crate::bindings::table::typed_function!($kind [$($($wit)*)?]);)*

        /// The one dispatch of the data form: each call's transform and typed function.
        pub(crate) fn bind(call: &Call) -> Bound<'_> {
            match call {
                $(
                    Call::$variant $({ $($field),* })? => $crate::bindings::table::bound!(
                        $kind [$($($wit)*)?] [$($($bind)*)?]
                    ),
                )*
            }
        }

        /// Checks that `instance` exports every function of `kind`'s rows with the row's types.
        pub(crate) fn check(
            kind: TransformKind,
            instance: &Instance,
            store: &mut CallStore,
        ) -> wasmtime::Result<()> {
            $($crate::bindings::table::checked_row!(
                kind, instance, store, $engine_kind [$($engine_wit)*]
            );)*
            $($crate::bindings::table::checked_row!(
                kind, instance, store, $kind [$($($wit)*)?]
            );)*
            Ok(())
        }
    };
}

/// A row's typed function (none for a call that is no WIT function).
macro_rules! typed_function {
    ($kind:ident []) => {};
    (
        $kind:ident [($wit:expr) fn $function:ident($($param:ident: $type:ty),* $(,)?) -> $result:ty
            $(= ($($argument:expr),* $(,)?))?]
    ) => {
        pub(crate) fn $function(
            instance: &Instance,
            store: &mut CallStore,
            $($param: $type),*
        ) -> wasmtime::Result<$result> {
            let (answer,) = instance.call::<($($type,)*), ($result,)>(
                store,
                TransformKind::$kind,
                $wit,
                ($($param,)*),
            )?;
            Ok($crate::bindings::table::Checked::checked(answer, TransformKind::$kind))
        }
    };
}

/// A call's binding: its typed function with the row's arguments, or the row's `bind[...]`.
macro_rules! bound {
    (
        $kind:ident [($wit:expr) fn $function:ident($($param:ident: $type:ty),* $(,)?) -> $result:ty
            = ($($argument:expr),* $(,)?)] []
    ) => {
        Bound::new(TransformKind::$kind, move |instance, store| {
            $function(instance, store, $($argument),*)
                .map(devin_bridge_calls::IntoAnswer::into_answer)
        })
    };
    ($kind:ident [$($wit:tt)*] [$bound:expr]) => {
        $bound
    };
}

/// The load-time check of a row's function, when the component is of the row's transform.
macro_rules! checked_row {
    ($kind_of:ident, $instance:ident, $store:ident, $kind:ident []) => {};
    (
        $kind_of:ident, $instance:ident, $store:ident,
        $kind:ident [($wit:expr) fn $function:ident($($param:ident: $type:ty),* $(,)?) -> $result:ty
            $(= ($($argument:expr),* $(,)?))?]
    ) => {
        if $kind_of == TransformKind::$kind {
            $instance.function::<($($type,)*), ($result,)>($store, $wit)?;
        }
    };
}

pub(crate) use {bound, checked_row, typed_function, wit_functions};
