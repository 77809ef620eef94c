//! A serializer that misbehaves on demand: markers in the request make it panic, loop
//! forever, allocate without bound, or fail with a non-error HTTP status (`204`, `101`), with
//! text the host must not pass on; anything else is served by the real serializer, so this
//! component passes the golden corpus and is a valid (different) version to hot-swap in.

#[cfg(target_arch = "wasm32")]
mod wasm {
    devin_bridge_types::guest_bindings!([serializer] {
        world: "serializer-component",
        path: "../../../wit",
    });

    use devin_bridge_types::{Failure, Prompt, PromptOptions, Resume, ResumedPrompt, UnseenPrompt};

    /// What the markers in a request ask for: a panic, an endless loop, unbounded allocation,
    /// or a failure with a status that is not an error status (both serializing functions).
    fn misbehave(request: &str) -> Result<(), Failure> {
        if request.contains("__PANIC__") {
            panic!("asked to panic");
        }
        if request.contains("__LOOP__") {
            let mut spins: u64 = 0;
            loop {
                spins = core::hint::black_box(spins.wrapping_add(1));
            }
        }
        if request.contains("__ALLOC__") {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                core::hint::black_box(&hoard);
            }
        }
        for (marker, status) in [("__STATUS_204__", 204u16), ("__STATUS_101__", 101)] {
            if request.contains(marker) {
                return Err(Failure {
                    code: "component_chosen_code".into(),
                    message: "component text from /srv/secret/path".into(),
                    status,
                    repairable: true,
                });
            }
        }
        Ok(())
    }

    struct Component;

    devin_bridge_types::guest_exports!(
        Serializer SerializerExports, Component: exports::devin_bridge::transforms::serializer::Guest {}
    );

    impl SerializerExports for Component {
        fn serialize(request: String) -> Result<Prompt, Failure> {
            misbehave(&request)?;
            devin_bridge_serializer::serialize(&request)
        }

        fn serialize_unseen(
            request: String,
            options: PromptOptions,
        ) -> Result<UnseenPrompt, Failure> {
            misbehave(&request)?;
            devin_bridge_serializer::serialize_unseen(&request, options)
        }

        fn serialize_resumed(
            continuation: String,
            resume: Resume,
            options: PromptOptions,
        ) -> Result<ResumedPrompt, Failure> {
            misbehave(&continuation)?;
            devin_bridge_serializer::serialize_resumed(&continuation, &resume, options)
        }
    }

    export!(Component);
}
