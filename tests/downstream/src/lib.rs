//! A greeting service, as a user of corewire writes one.

use corewire::{service_id, Request, Response, Service, Status};

/// Answers `name` with `hello, name`, and counts the calls this shard answered.
#[derive(Default)]
pub struct Greeter {
    answered: std::cell::Cell<u64>,
}

impl Greeter {
    pub const GREET: u32 = 1;
    pub const COUNT: u32 = 2;
}

impl Service for Greeter {
    const ID: u32 = service_id("greeter");

    async fn call(&self, req: Request) -> Result<Response, Status> {
        match req.method {
            Greeter::GREET => {
                let name = std::str::from_utf8(&req.payload)
                    .map_err(|_| Status::BadRequest("the name is not UTF-8".into()))?;
                self.answered.set(self.answered.get() + 1);
                Ok(Response::new(format!("hello, {name}")))
            }
            Greeter::COUNT => Ok(Response::new(self.answered.get().to_string())),
            other => Err(Status::BadRequest(format!(
                "the greeter has no method {other}"
            ))),
        }
    }
}
