//! Device, port and GID selection, and one process on two devices, in the soft-RoCE VM. The
//! test VM has two devices (vm/run-in-rxe-vm.sh, RXE_VM_NETDEV=dummy2, the default): rxe0 on
//! rxe-d0 (10.77.0.1) and rxe1 on rxe-d1 (10.77.1.1).

mod rdma_common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use corewire::transport::rdma::{self, DeviceSelector, RdmaConfig, RdmaEndpoint};
use corewire::{Client, ClientOptions, Runtime, Server, Service};
use rdma_common::{polling, Echo};

const RXE0: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const RXE1: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 1);

fn port() -> u16 {
    rdma_common::rdma_listen_addr().port()
}

/// Panics with a hint unless the VM's second device is there.
fn require_two_devices() -> Vec<corewire_verbs::DeviceInfo> {
    corewire_verbs::testing::require_device();
    let devices = corewire_verbs::list_devices().unwrap();
    assert!(
        devices.iter().any(|d| d.name == "rxe1"),
        "these tests need the VM's second RDMA device (vm/run-in-rxe-vm.sh with \
         RXE_VM_NETDEV=dummy2, the default); found: {devices:?}"
    );
    devices
}

fn runtime(config: RdmaConfig) -> Result<Runtime, rdma::RdmaError> {
    let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
    rdma::install(&rt, config)?;
    Ok(rt)
}

fn echo_once(rt: &Runtime, addr: SocketAddr) {
    let r = rt
        .run_on(0, move || async move {
            let c = Client::connect_rdma(addr, ClientOptions::default())
                .await
                .unwrap();
            c.call(Echo::ID, 0, "hi".into()).await.unwrap()
        })
        .unwrap();
    assert_eq!(&r[..], b"hi");
}

/// With no device chosen, one shard serves (and makes) connections on both devices: it opens
/// a PD, CQ and pool on each device it is handed.
#[test]
fn rdma_one_shard_serves_connections_on_two_devices() {
    require_two_devices();
    let rt = runtime(polling()).unwrap();
    let p = port();
    let on = |ip: Ipv4Addr| {
        Server::builder()
            .service(|_| Echo)
            .build()
            .serve(&rt, RdmaEndpoint::bind(SocketAddr::new(IpAddr::V4(ip), p)))
            .unwrap()
    };
    let (a, b) = (on(RXE0), on(RXE1));
    echo_once(&rt, a.local_addr());
    echo_once(&rt, b.local_addr());
    let st = rdma::stats(&rt)[0];
    assert_eq!(st.devices, 2, "{st:?}");
    a.stop();
    b.stop();
}

/// Choosing the device by name, network device, IP address or GID index: a listener on the
/// wildcard address binds the chosen device's address, connections resolve from it, and the
/// shard opens that device only.
#[test]
fn rdma_the_device_can_be_chosen_by_name_netdev_ip_or_gid() {
    let devices = require_two_devices();
    let gid_of_rxe1 = devices
        .iter()
        .find(|d| d.name == "rxe1")
        .and_then(|d| d.ports[0].gids.iter().find(|g| g.ip() == IpAddr::V4(RXE1)))
        .map(|g| g.index)
        .expect("rxe1 has 10.77.1.1 in its GID table");
    let choices = [
        (DeviceSelector::Name("rxe1".into()), None),
        (DeviceSelector::Netdev("rxe-d1".into()), None),
        (DeviceSelector::Ip(IpAddr::V4(RXE1)), None),
        (DeviceSelector::Name("rxe1".into()), Some(gid_of_rxe1)),
    ];
    for (device, gid_index) in choices {
        let what = format!("{device:?} gid {gid_index:?}");
        let rt = runtime({
            let mut o = polling();
            o.device = device;
            o.gid_index = gid_index;
            o
        })
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        let wildcard = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port());
        let server = Server::builder()
            .service(|_| Echo)
            .build()
            .serve(&rt, RdmaEndpoint::bind(wildcard))
            .unwrap();
        assert_eq!(server.local_addr().ip(), IpAddr::V4(RXE1), "{what}");
        echo_once(&rt, server.local_addr());
        let st = rdma::stats(&rt)[0];
        assert_eq!(st.devices, 1, "{what}: {st:?}");
        server.stop();
    }
}

/// A device that is not there is an error naming the devices that are.
#[test]
fn rdma_a_missing_device_is_an_error_listing_the_devices_present() {
    require_two_devices();
    let err = runtime({
        let mut o = polling();
        o.device = DeviceSelector::Name("mlx5_9".into());
        o
    })
    .err()
    .expect("a missing device was accepted");
    let text = err.to_string();
    assert!(text.contains("no RDMA device named \"mlx5_9\""), "{text}");
    assert!(
        text.contains("rxe0") && text.contains("rxe1") && text.contains("10.77.1.1 on rxe-d1"),
        "{text}"
    );
    let err = runtime({
        let mut o = polling();
        o.device = DeviceSelector::Name("rxe0".into());
        o.gid_index = Some(4000);
        o
    })
    .err()
    .expect("a missing GID was accepted");
    assert!(err.to_string().contains("no GID 4000"), "{err}");
}

/// Listening on another device's address than the chosen one is refused with the reason.
#[test]
fn rdma_listening_off_the_chosen_device_is_refused() {
    require_two_devices();
    let rt = runtime({
        let mut o = polling();
        o.device = DeviceSelector::Name("rxe1".into());
        o
    })
    .unwrap();
    let err = Server::builder()
        .service(|_| Echo)
        .build()
        .serve(
            &rt,
            RdmaEndpoint::bind(SocketAddr::new(IpAddr::V4(RXE0), port())),
        )
        .err()
        .expect("listened on rxe0's address with rxe1 chosen");
    assert!(
        err.to_string()
            .contains("is on RDMA device \"rxe0\", not the chosen \"rxe1\""),
        "{err}"
    );
}
