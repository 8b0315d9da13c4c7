//! Running a command on a host that looks as if rdma-core, pkg-config and libclang were never
//! installed: a private mount namespace (`unshare --mount`) with an empty tmpfs over their
//! directories and `/dev/null` bound over their files. Nothing outside the command sees it,
//! and the command is only started once a probe confirms that the headers cannot be included
//! and the libraries cannot be loaded.
//!
//! This is what docs.rs and a user's machine without RDMA look like to a build: the crates
//! must build, document and package there, and `rdma::install` must say what is missing.

use std::ffi::OsStr;
use std::process::Command;

/// Directories replaced by an empty tmpfs (shell globs): rdma-core's headers, its providers,
/// and LLVM's installation (libclang, its headers and `clang`).
pub const HIDDEN_DIRS: &[&str] = &[
    "/usr/include/infiniband",
    "/usr/include/rdma",
    "/usr/lib/*/libibverbs",
    "/usr/lib/llvm-*",
];

/// Files replaced by `/dev/null` (shell globs; symlinks hide what they point to).
pub const HIDDEN_FILES: &[&str] = &[
    "/usr/lib/*/libibverbs.so*",
    "/usr/lib/*/librdmacm.so*",
    "/usr/lib/*/libibverbs.a",
    "/usr/lib/*/librdmacm.a",
    "/usr/lib/*/libclang*.so*",
    "/usr/lib/*/pkgconfig/libibverbs.pc",
    "/usr/lib/*/pkgconfig/librdmacm.pc",
    "/usr/bin/pkgconf",
    "/usr/bin/pkg-config",
    "/usr/bin/*-pkg-config",
];

/// The shell script that hides them, checks that they are gone, and execs its arguments.
pub fn script() -> String {
    let mut s = String::from(
        "set -eu\n\
         fail() { echo \"xtask: hiding rdma-core and libclang failed: $*\" >&2; exit 97; }\n\
         for d in DIRS; do\n  \
           if [ -d \"$d\" ]; then mount -t tmpfs -o size=64k,mode=0755 xtask-hidden \"$d\"; fi\n\
         done\n\
         for f in FILES; do\n  \
           if [ -e \"$f\" ]; then mount --bind /dev/null \"$f\"; fi\n\
         done\n\
         for h in infiniband/verbs.h rdma/rdma_cma.h; do\n  \
           if printf '#include <%s>\\n' \"$h\" | cc -E -x c - >/dev/null 2>&1; then\n    \
             fail \"<$h> still compiles\"\n  \
           fi\n\
         done\n\
         for f in FILES; do\n  \
           if [ -s \"$f\" ]; then fail \"$f is still there\"; fi\n\
         done\n\
         if pkg-config --exists libibverbs 2>/dev/null; then\n  \
           fail 'pkg-config still finds libibverbs'\n\
         fi\n\
         echo 'xtask: hidden: rdma-core headers, libraries and providers, pkg-config, libclang' >&2\n\
         unset XTASK_HIDE_SCRIPT\n\
         exec \"$@\"\n",
    );
    s = s.replace("DIRS", &HIDDEN_DIRS.join(" "));
    s.replace("FILES", &HIDDEN_FILES.join(" "))
}

/// `program args...` inside the hiding namespace. As root that is a plain mount namespace;
/// otherwise a user namespace maps us to root inside it (mounts need it).
pub fn command<I, S>(program: impl AsRef<OsStr>, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = Command::new("unshare");
    if !crate::setup::is_root() {
        c.args(["--user", "--map-root-user"]);
    }
    // The script travels in the environment so that the command line (which xtask logs)
    // stays one readable line.
    c.env(SCRIPT_VAR, script())
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(format!("eval \"${SCRIPT_VAR}\""))
        .arg("xtask-hidden")
        .arg(program)
        .args(args);
    c
}

/// The environment variable that carries [`script`] into the namespace.
const SCRIPT_VAR: &str = "XTASK_HIDE_SCRIPT";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_hides_every_path_and_checks_before_running() {
        let s = script();
        for p in HIDDEN_DIRS.iter().chain(HIDDEN_FILES) {
            assert!(s.contains(p), "{p} is not hidden: {s}");
        }
        let probe = s.find("cc -E").unwrap();
        let exec = s.find("exec \"$@\"").unwrap();
        assert!(probe < exec, "{s}");
        assert!(s.starts_with("set -eu\n"));
    }

    #[test]
    fn the_command_runs_the_program_after_the_script() {
        let c = command("cargo", ["doc"]);
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = args.iter().position(|a| a == "xtask-hidden").unwrap();
        assert_eq!(args[at + 1..], ["cargo", "doc"]);
        assert!(args.contains(&"--mount".to_string()));
        let script = c
            .get_envs()
            .find(|(k, _)| *k == SCRIPT_VAR)
            .and_then(|(_, v)| v)
            .unwrap();
        assert_eq!(script.to_string_lossy(), super::script());
    }
}
