//! `#[corewire::main]` and `#[corewire::test]`: run an `async fn` as the root task of a
//! corewire runtime (on shard 0, so it may hold `!Send` values across awaits).
//!
//! Options, comma-separated: `shards = N` (default 1; the other shards are there for
//! `submit_to`/`spawn_on` work), `crate = "path"`, the path to the runtime crate (default
//! `::corewire::runtime`, or `::corewire_runtime` when the package being built is the
//! runtime itself).
#![deny(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ItemFn, Lit, MetaNameValue, Path, Token};

/// Run `async fn main` on a corewire runtime. The runtime starts with `shards` shards (default
/// 1), pinned as [`RuntimeBuilder`] does by default; `main` runs on shard 0, and returns
/// what `main` may return: `()` or a `Result` whose error is `Debug` (printed as `Error: ..`
/// with exit status 1).
///
/// ```ignore
/// #[corewire::main(shards = 2)]
/// async fn main() -> std::io::Result<()> {
///     let listener = corewire::runtime::net::TcpListener::bind(addr, Default::default())?;
///     /* ... */
///     Ok(())
/// }
/// ```
///
/// [`RuntimeBuilder`]: https://docs.rs/corewire-runtime
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Kind::Main, args.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Run an `async fn` test on a fresh, unpinned corewire runtime (one shard unless
/// `shards = N`), on shard 0. A panic in the test fails it with the original message; a test
/// returning `Err(e)` fails showing `e`.
///
/// ```ignore
/// #[corewire::test]
/// async fn sleeps() {
///     corewire::sleep(std::time::Duration::from_millis(1)).await;
/// }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(Kind::Test, args.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Main,
    Test,
}

struct Options {
    shards: Option<Expr>,
    krate: Path,
}

fn parse_options(args: TokenStream2) -> syn::Result<Options> {
    // The runtime's own tests and doc tests reach it as `corewire_runtime`; everyone else
    // goes through the `corewire` facade.
    let krate = match std::env::var("CARGO_PKG_NAME").as_deref() {
        Ok("corewire-runtime") => syn::parse_quote!(::corewire_runtime),
        _ => syn::parse_quote!(::corewire::runtime),
    };
    let mut opts = Options {
        shards: None,
        krate,
    };
    let pairs = Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(args)?;
    for pair in pairs {
        let name = pair
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match name.as_str() {
            "shards" => match &pair.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Int(n), ..
                }) if n.base10_parse::<usize>()? >= 1 => opts.shards = Some(pair.value.clone()),
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "`shards` takes a number of shards, at least 1",
                    ))
                }
            },
            "crate" => match &pair.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) => opts.krate = s.parse()?,
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "`crate` takes the runtime crate's path as a string",
                    ))
                }
            },
            _ => {
                return Err(syn::Error::new(
                    pair.path.span(),
                    "unknown option (expected `shards = N` or `crate = \"path\"`)",
                ))
            }
        }
    }
    Ok(opts)
}

fn expand(kind: Kind, args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let opts = parse_options(args)?;
    let mut func: ItemFn = syn::parse2(item)?;
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            "the function must be `async fn`",
        ));
    }
    if !sig.inputs.is_empty() {
        return Err(syn::Error::new(
            sig.inputs.span(),
            "the function takes no arguments",
        ));
    }
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "the function cannot be generic",
        ));
    }
    if kind == Kind::Main && sig.ident != "main" {
        return Err(syn::Error::new(
            sig.ident.span(),
            "#[corewire::main] goes on `async fn main`",
        ));
    }
    let krate = &opts.krate;
    let shards = opts.shards.map(|e| quote!(#e)).unwrap_or_else(|| quote!(1));
    let attrs = std::mem::take(&mut func.attrs);
    let vis = &func.vis;
    let name = &func.sig.ident;
    let output = &func.sig.output;
    let body = &func.block;
    let inner = syn::Ident::new("__corewire_body", Span::call_site());
    let span = func.sig.ident.span();
    Ok(match kind {
        Kind::Main => quote_spanned! {span=>
            #(#attrs)*
            #vis fn #name() -> ::std::process::ExitCode {
                async fn #inner() #output #body
                #krate::__private::run_main(#shards, #inner)
            }
        },
        Kind::Test => quote_spanned! {span=>
            #[::core::prelude::v1::test]
            #(#attrs)*
            #vis fn #name() {
                async fn #inner() #output #body
                #krate::__private::run_test(#shards, #inner)
            }
        },
    })
}
