//! A component's exports, made from the table of the transforms' functions (`functions`).
//!
//! `guest_exports!(Sse SseExports, Component: path::to::sse::Guest { ... })` defines a trait,
//! `SseExports`, with one method per WIT function of the transform, each answering as the
//! library does by default (the row's `guest(...)`, else its `native(...)`), and implements
//! wit-bindgen's `Guest` trait for `Component` by calling it. The component writes
//! `impl SseExports for Component {}` (a test component overrides the methods whose answers it
//! changes), so a new WIT function needs no export code of its own: wit-bindgen's `Guest`
//! traits have no default methods, this trait has.
//!
//! Invariants:
//! - A method's parameters are the owned forms of the row's parameter types ([`GuestParam`]:
//!   `&str` is `String`, `&[T]` is `Vec<T>`, `Option<&T>` is `Option<T>`), which is what
//!   wit-bindgen passes; the answer is the row's result type. A row that disagrees with the
//!   WIT does not compile in any component.
//! - The expansion site names the five libraries as the table does (`serializer`, `envelope`,
//!   `sse`, `model_alias`, `safeguard`: `use crate as sse;` in the sse component), and the
//!   types of the rows it exports.
//! - The braces hold the other items of the `Guest` impl (the envelope's
//!   `type ReplyStream = ...;`).

/// The type wit-bindgen passes an export for a parameter the host passes as `Self`.
pub trait GuestParam {
    type Owned;
}

impl<T: ?Sized + ToOwned> GuestParam for &T {
    type Owned = T::Owned;
}

impl<T: ?Sized + ToOwned> GuestParam for Option<&T> {
    type Owned = Option<T::Owned>;
}

/// Parameters passed by value on both sides.
macro_rules! by_value {
    ($($type:ty),* $(,)?) => {$(
        impl GuestParam for $type {
            type Owned = $type;
        }
    )*};
}

by_value!(u32, u64, bool, crate::PromptOptions);

/// See the module documentation of `exports`.
#[macro_export]
macro_rules! guest_exports {
    ($kind:ident $exports:ident, $component:ident: $($guest:ident)::+ { $($items:tt)* }) => {
        $crate::transform_functions!([$crate::guest_exports] {
            @table $kind $exports $component [$($guest)::+] [$($items)*]
        });
    };
    (
        @table $kind:ident $exports:ident $component:ident [$($guest:tt)*] [$($items:tt)*]
        $(
            $(#[$doc:meta])*
            $variant:ident $({ $($(#[$field_attr:meta])* $field:ident: $type:ty),* $(,)? })?
                => $row_kind:ident $(wit[$($wit:tt)*])? $(bind[$($bind:tt)*])?
                $(guest($answer:expr))? native($native:expr);
        )*
    ) => {
        /// The exports of this component's transform, answering as the library does unless a
        /// method is overridden (made from the table of the transforms' functions).
        pub(crate) trait $exports {
            $($crate::guest_exports!(
                @if $kind $row_kind @default [$($($wit)*)?] [$($answer)?] [$native]
            );)*
        }

        impl $($guest)* for $component {
            $($items)*
            $($crate::guest_exports!(
                @if $kind $row_kind @forward $exports $component [$($($wit)*)?]
            );)*
        }
    };
    // A row of another transform makes nothing.
    (@if Serializer Serializer $($rest:tt)*) => { $crate::guest_exports!($($rest)*); };
    (@if Envelope Envelope $($rest:tt)*) => { $crate::guest_exports!($($rest)*); };
    (@if Sse Sse $($rest:tt)*) => { $crate::guest_exports!($($rest)*); };
    (@if ModelAlias ModelAlias $($rest:tt)*) => { $crate::guest_exports!($($rest)*); };
    (@if Safeguard Safeguard $($rest:tt)*) => { $crate::guest_exports!($($rest)*); };
    (@if $kind:ident $row_kind:ident $($rest:tt)*) => {};
    // A call that is no WIT function (a whole reply stream) exports nothing.
    (@default [] $($rest:tt)*) => {};
    (@forward $exports:ident $component:ident []) => {};
    (
        @default [($wit:expr) fn $function:ident($($param:ident: $type:ty),* $(,)?) -> $result:ty
            $(= ($($argument:expr),* $(,)?))?] [$($answer:expr)?] [$native:expr]
    ) => {
        #[allow(unused_variables)]
        fn $function($($param: <$type as $crate::GuestParam>::Owned),*) -> $result {
            $(let $param = &$param;)*
            $crate::guest_exports!(@answer [$($answer)?] [$native])
        }
    };
    (
        @forward $exports:ident $component:ident
        [($wit:expr) fn $function:ident($($param:ident: $type:ty),* $(,)?) -> $result:ty
            $(= ($($argument:expr),* $(,)?))?]
    ) => {
        fn $function($($param: <$type as $crate::GuestParam>::Owned),*) -> $result {
            <$component as $exports>::$function($($param),*)
        }
    };
    (@answer [$answer:expr] [$native:expr]) => { $answer };
    (@answer [] [$native:expr]) => { $native };
}
