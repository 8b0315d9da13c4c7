//! The code corewire-build generates for `proto/shop`, and a catalog served from it.

use std::cell::RefCell;
use std::collections::BTreeMap;

use corewire::typed::{Request, Response, ServerStream};
use corewire::Status;

/// Generated from `shop/common/money.proto`.
pub mod shop {
    pub mod common {
        corewire::include_proto!("shop.common");
    }
    pub mod catalog {
        corewire::include_proto!("shop.catalog");
    }
}

use shop::catalog::catalog_server::Catalog;
use shop::catalog::{GetRequest, Item, ListRequest};

/// A catalog of items, one copy per shard (state in a `RefCell`).
#[derive(Default)]
pub struct Shelf {
    pub items: RefCell<BTreeMap<String, Item>>,
}

impl Catalog for Shelf {
    fn get(&self, request: Request<GetRequest>) -> Result<Response<Item>, Status> {
        let id = &request.get_ref().id;
        match self.items.borrow().get(id) {
            Some(item) => Ok(Response::new(item.clone())),
            None => Err(Status::NotFound(format!("no item {id}"))),
        }
    }

    async fn list(
        &self,
        request: Request<ListRequest>,
        mut replies: ServerStream<Item>,
    ) -> Result<(), Status> {
        let ListRequest { kinds, limit } = request.into_inner();
        let chosen: Vec<Item> = self
            .items
            .borrow()
            .values()
            .filter(|i| kinds.is_empty() || kinds.contains(&i.kind))
            .take(limit as usize)
            .cloned()
            .collect();
        for item in chosen {
            replies.send(item).await?;
        }
        Ok(())
    }

    async fn r#match(&self, request: Request<GetRequest>) -> Result<Response<Item>, Status> {
        self.get(request)
    }
}
