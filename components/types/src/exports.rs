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
//! - The expansion site names the library of its transform by its crate name, as the table
//!   does (`devin_bridge_sse`: the sse component declares `extern crate self as
//!   devin_bridge_sse;` at its root), and the types of the rows it exports.
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
        $crate::guest_exports!(@select ($) $kind $exports $component [$($guest)::+] [$($items)*]);
    };
    // A row is this component's when its transform is `$kind`. macro_rules cannot compare two
    // identifiers, so this defines a macro whose first rule matches `$kind` itself (`$d` is a
    // `$` handed in, the stable way for a macro to write a macro): no rule here names a
    // transform, and a new transform needs none.
    (@select ($d:tt) $kind:ident $exports:ident $component:ident [$($guest:tt)*] [$($items:tt)*]) => {
        macro_rules! __guest_exports_if_mine {
            ($kind $d($d rest:tt)*) => { $crate::guest_exports!($d($d rest)*); };
            ($d other:ident $d($d rest:tt)*) => {};
        }
        $crate::transform_functions!([$crate::guest_exports] {
            @table $kind $exports $component [$($guest)*] [$($items)*]
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
            $(__guest_exports_if_mine!(
                $row_kind @default [$($($wit)*)?] [$($answer)?] [$native]
            );)*
        }

        impl $($guest)* for $component {
            $($items)*
            $(__guest_exports_if_mine!(
                $row_kind @forward $exports $component [$($($wit)*)?]
            );)*
        }
    };
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
