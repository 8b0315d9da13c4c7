//! Generation from proto text: the code is produced and mentions what it must, and clashing
//! method ids fail the build.

use std::fs;

fn compile(proto: &str) -> Result<String, crate::Error> {
    compile_with(proto, &[])
}

fn compile_with(proto: &str, sync: &[&str]) -> Result<String, crate::Error> {
    let dir = std::env::temp_dir().join(format!(
        "corewire-build-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    fs::create_dir_all(dir.join("out")).unwrap();
    fs::write(dir.join("t.proto"), proto).unwrap();
    let result = crate::configure()
        .sync_methods(sync.iter().copied())
        .out_dir(dir.join("out"))
        .compile_protos(&[dir.join("t.proto")], &[&dir]);
    let out = result.map(|()| fs::read_to_string(dir.join("out/t.rs")).unwrap());
    let _ = fs::remove_dir_all(&dir);
    out
}

#[test]
fn a_service_becomes_a_trait_a_server_and_a_client() {
    let code = compile(
        r#"syntax = "proto3";
        package t;
        message A { string s = 1; }
        // Says things.
        service Talk {
          // One.
          rpc Say (A) returns (A);
          rpc Many (A) returns (stream A);
          rpc Up (stream A) returns (A);
        }"#,
    )
    .unwrap();
    for want in [
        "pub mod talk_server",
        "pub trait Talk: 'static",
        "fn say(",
        "fn many(",
        "ServerStream<super::A>",
        "pub struct TalkServer<T>",
        "\"/t.Talk/Say\"",
        "MethodKind::ServerStreaming",
        "pub mod talk_client",
        "pub struct TalkClient<",
        "Streaming<C, super::A>",
        "/// Says things.",
        "/// One.",
    ] {
        assert!(code.contains(want), "missing {want:?} in:\n{code}");
    }
    // The client-streaming method is left out, not stubbed.
    assert!(!code.contains("fn up("));
    assert!(!code.contains("/t.Talk/Up"));
}

#[test]
fn proto_errors_name_the_file_and_line() {
    let err = compile("syntax = \"proto3\";\nmessage A { strin s = 1; }\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("t.proto"), "{text}");
}

#[test]
fn methods_whose_ids_collide_fail_the_build() {
    // Two names with the same FNV-1a hash (found by search).
    assert_eq!(
        crate::method_id("/t.S/VWncXijl"),
        crate::method_id("/t.S/pdjWDAZQ")
    );
    let err = compile(
        r#"syntax = "proto3";
        package t;
        message A {}
        service S {
          rpc VWncXijl (A) returns (A);
          rpc pdjWDAZQ (A) returns (A);
        }"#,
    )
    .unwrap_err();
    assert!(err.to_string().contains("same id"), "{err}");
}

const TALK: &str = r#"syntax = "proto3";
    package t;
    message A { string s = 1; }
    service Talk {
      rpc Say (A) returns (A);
      rpc Ask (A) returns (A);
      rpc Many (A) returns (stream A);
    }"#;

#[test]
fn sync_methods_are_plain_fns_served_in_call_now() {
    // Compared without whitespace: prost-build formats the code.
    let flat = |text: &str| text.split_whitespace().collect::<String>();
    let code = flat(&compile_with(TALK, &["/t.Talk/Say"]).unwrap());
    for want in [
        "fn say(&self, request: ::corewire::typed::Request<super::A>,) -> \
         ::core::result::Result<",
        "fn ask(&self, request: ::corewire::typed::Request<super::A>,) -> impl \
         ::core::future::Future",
        "fn call_now(&self, request: ::corewire::Request, reply: ::corewire::ReplyTo<'_>,) -> \
         ::corewire::CallNow",
        "::corewire::typed::unary_now(&self.stats, 0, request, reply, |r| self.inner.say(r),)",
        "::corewire::typed::unary(&self.stats, 1, request, |r| self.inner.ask(r),).await",
    ] {
        assert!(code.contains(&flat(want)), "missing {want:?} in:\n{code}");
    }
    // `call` no longer serves the synchronous method.
    assert!(!code.contains(&flat("::corewire::typed::unary(&self.stats, 0,")));
    // Without it, no `call_now` is generated (the raw layer's default hands requests on).
    assert!(!compile(TALK).unwrap().contains("fn call_now("));
}

#[test]
fn sync_methods_must_be_unary_methods_of_the_files() {
    for (name, why) in [
        ("/t.Talk/Nope", "no method /t.Talk/Nope"),
        ("t.Talk/Say", "no method t.Talk/Say"),
        ("/t.Talk/Many", "streams"),
    ] {
        let err = compile_with(TALK, &[name]).unwrap_err().to_string();
        assert!(err.contains(why), "{name}: {err}");
    }
}
