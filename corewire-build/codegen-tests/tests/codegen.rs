//! What corewire-build made of `proto/shop`: messages with every shape prost knows (nested
//! messages and enums, oneof, maps, repeated fields, another package's types, a well-known
//! type) round-trip, the service's names and kinds are gRPC's, and the generated server and
//! client talk over corewire's framing.

use std::collections::HashMap;
use std::time::Duration;

use corewire::service::MethodKind;
use corewire::{ClientError, ClientOptions, Runtime, Server, Status, TcpEndpoint};
use corewire_codegen_tests::shop::catalog::catalog_client::CatalogClient;
use corewire_codegen_tests::shop::catalog::catalog_server::{self, CatalogServer};
use corewire_codegen_tests::shop::catalog::item::{dimensions, Dimensions, Discount, Kind};
use corewire_codegen_tests::shop::catalog::{GetRequest, Item, ListRequest};
use corewire_codegen_tests::shop::common::{Availability, Money};
use corewire_codegen_tests::Shelf;
use prost::Message as _;

fn book(id: &str) -> Item {
    Item {
        id: id.into(),
        price: Some(Money {
            currency: "EUR".into(),
            units: 12,
            nanos: 500_000_000,
        }),
        tags: vec!["paper".into(), "used".into()],
        stock_by_store: HashMap::from([("north".into(), 3), ("south".into(), 0)]),
        kind: Kind::Book as i32,
        dimensions: Some(Dimensions {
            width: 13.5,
            height: 21.0,
            unit: Some(dimensions::Unit { name: "cm".into() }),
        }),
        discount: Some(Discount::Amount(Money {
            currency: "EUR".into(),
            units: 2,
            nanos: 0,
        })),
        added: Some(prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 0,
        }),
        thumbnail: vec![0xff, 0xd8, 0xff],
        availability: Availability::InStock as i32,
        units: vec![dimensions::Unit { name: "in".into() }],
        price_history: HashMap::from([(
            1,
            Money {
                currency: "EUR".into(),
                units: 15,
                nanos: 0,
            },
        )]),
    }
}

#[test]
fn every_shape_of_message_round_trips() {
    let item = book("b1");
    let back = Item::decode(&item.encode_to_vec()[..]).unwrap();
    assert_eq!(back, item);
    let food = Item {
        kind: Kind::Food as i32,
        discount: Some(Discount::Percent(10)),
        ..Item::default()
    };
    assert_eq!(Item::decode(&food.encode_to_vec()[..]).unwrap(), food);
    assert_eq!(back.kind(), Kind::Book);
    assert_eq!(back.availability(), Availability::InStock);
}

#[test]
fn the_service_has_grpcs_names() {
    assert_eq!(catalog_server::SERVICE_NAME, "shop.catalog.Catalog");
    let methods: Vec<(&str, MethodKind)> = catalog_server::METHODS
        .iter()
        .map(|m| (m.name, m.kind))
        .collect();
    assert_eq!(
        methods,
        [
            ("/shop.catalog.Catalog/Get", MethodKind::Unary),
            ("/shop.catalog.Catalog/List", MethodKind::ServerStreaming),
            ("/shop.catalog.Catalog/Match", MethodKind::Unary),
        ]
    );
    for m in catalog_server::METHODS {
        assert_eq!(m.id, corewire::service_id(m.name));
        assert_eq!(m.id, corewire_build::method_id(m.name));
    }
}

#[test]
fn the_generated_server_and_client_talk() {
    let rt = Runtime::builder().shards(2).pin(false).build().unwrap();
    let server = Server::builder()
        .service(|_| {
            let shelf = Shelf::default();
            for id in ["a", "b", "c"] {
                shelf.items.borrow_mut().insert(id.into(), book(id));
            }
            shelf.items.borrow_mut().insert(
                "f".into(),
                Item {
                    id: "f".into(),
                    kind: Kind::Food as i32,
                    ..Item::default()
                },
            );
            CatalogServer::new(shelf)
        })
        .build();
    let listener = server
        .serve(&rt, TcpEndpoint::bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let addr = listener.local_addr();
    rt.run_on(0, move || async move {
        let catalog = CatalogClient::connect_tcp(addr, ClientOptions::default())
            .await
            .unwrap();
        let item = catalog
            .get(GetRequest { id: "b".into() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(item, book("b"));
        let same = catalog
            .r#match(GetRequest { id: "b".into() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(same, item);
        let err = catalog
            .get(GetRequest { id: "zz".into() })
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ClientError::Status(Status::NotFound("no item zz".into()))
        );

        let mut books = catalog
            .list(
                corewire::typed::Request::new(ListRequest {
                    kinds: vec![Kind::Book as i32],
                    limit: 10,
                })
                .with_timeout(Duration::from_secs(5)),
            )
            .await
            .unwrap();
        let mut ids = Vec::new();
        while let Some(item) = books.message().await.unwrap() {
            ids.push(item.id);
        }
        assert_eq!(ids, ["a", "b", "c"]);
    })
    .unwrap();
    listener.stop();
}
