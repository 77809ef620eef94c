//! A serializer that imports WASI (`wasi:cli/environment`): on the marker `__ENV__` it would
//! report what it can see of the host (environment, arguments, working directory); anything
//! else is served by the real serializer. Transforms may import nothing with a capability, so
//! the host must refuse it at load, naming the import.

#[cfg(target_arch = "wasm32")]
mod wasm {
    devin_bridge_types::guest_bindings!([serializer] {
        world: "devin-bridge:wasi-probe/probe",
        path: ["../../../wit", "wit"],
        generate_all,
    });

    use devin_bridge_types::{Failure, Prompt, PromptOptions, Resume, ResumedPrompt, UnseenPrompt};
    use wasi::cli::environment;

    /// `__ENV__` in a request: a failure that reports what the component can see of its
    /// environment, arguments and working directory (both serializing functions).
    fn probe(request: &str) -> Result<(), Failure> {
        if request.contains("__ENV__") {
            let env = environment::get_environment();
            let args = environment::get_arguments();
            let cwd = environment::initial_cwd();
            return Err(Failure {
                code: "probe".into(),
                message: format!(
                    "env={} args={} cwd={}",
                    env.len(),
                    args.len(),
                    cwd.unwrap_or_default()
                ),
                status: 418,
                repairable: false,
            });
        }
        Ok(())
    }

    struct Component;

    devin_bridge_types::guest_exports!(
        Serializer SerializerExports, Component: exports::devin_bridge::transforms::serializer::Guest {}
    );

    impl SerializerExports for Component {
        fn serialize(request: String) -> Result<Prompt, Failure> {
            probe(&request)?;
            devin_bridge_serializer::serialize(&request)
        }

        fn serialize_unseen(
            request: String,
            options: PromptOptions,
        ) -> Result<UnseenPrompt, Failure> {
            probe(&request)?;
            devin_bridge_serializer::serialize_unseen(&request, options)
        }

        fn serialize_resumed(
            continuation: String,
            resume: Resume,
            options: PromptOptions,
        ) -> Result<ResumedPrompt, Failure> {
            probe(&continuation)?;
            devin_bridge_serializer::serialize_resumed(&continuation, &resume, options)
        }
    }

    export!(Component);
}
