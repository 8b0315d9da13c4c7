//! Reference values were produced by redis-server 7.0 (`PFADD`, then `GET` of the value).

use super::*;

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn add_all(value: &mut Vec<u8>, elements: impl IntoIterator<Item = String>) -> bool {
    let mut changed = false;
    for element in elements {
        changed |= add(value, element.as_bytes(), DEFAULT_SPARSE_MAX_BYTES).unwrap();
    }
    changed
}

/// `PFADD d e1 ... e200` on redis-server (one PFADD per element), sparse.
const E200_SPARSE: &str = "48594c4c010000000000000000000080368421801980409f8408a40e88409084406c9c0190018812883884409480411c881788405580008041998812804075800d842a8040638440768c404684414880098040d5800980409480407e9040738040628440a280408384405d84148040cb8407840d8040f080405e80068427844081803c844047840780404e80408f84039404844043840c842684406e80407380404084409d84198019802a8441028c088440e8803f8010801c884060801080404b8c4052881b8040b080406e8040bc802b8c40f58040618c1a840380407e80408080404580088440fd80405a80406684409f8040468c108c018401841e8811802384407d8440de84406280308812844065840784198040de84404684408b8814802988008402800a8840578041a79011842e844070801f840180189440f98440848c168421813c881d801380368410804089844044804147800380228040b88440bb88404684168040c684404980048440e680404380388c405c80405584409980268005800380405480409e88404c882e8840448040b080198408841f880380405b841b803f804044804055800d88128440d380405988408b800290407e800784407b801d841d8040af8418840f844045803384404f80288440a78440768040578419844048800e9022840a80406a840d8039801380409a8828804046844044";

#[test]
fn murmur_matches_redis() {
    // The sparse bytes below depend on every register index and count being Redis's.
    let mut value = new_sparse();
    assert_eq!(
        to_hex(&value),
        "48594c4c010000000000000000000000".to_owned() + "7fff"
    );
    assert!(add_all(&mut value, ["a", "b", "c"].map(String::from)));
    let mut expected = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80".to_vec();
    expected.extend_from_slice(b"`\xf3\x80P\xb1\x84K\xfb\x80BZ");
    assert_eq!(value, expected);
    assert_eq!(
        decode_sparse(&value),
        "Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603"
    );
    assert_eq!(count(&value), Ok(3));
    assert!(!add_all(&mut value, ["a", "b", "c"].map(String::from)));
}

#[test]
fn sparse_updates_build_redis_bytes_and_dense_agrees() {
    let mut sparse = new_sparse();
    add_all(&mut sparse, (1..=200).map(|i| format!("e{i}")));
    assert_eq!(to_hex(&sparse), E200_SPARSE);
    assert_eq!(count(&sparse), Ok(200));
    let mut dense = sparse.clone();
    // redis-server had cached the count before converting.
    set_cache(&mut dense, 200);
    assert_eq!(to_dense(&mut dense), Ok(true));
    assert_eq!(dense.len(), DENSE_SIZE);
    assert_eq!(validate(&dense), Ok(Encoding::Dense));
    assert_eq!(to_hex(&dense), include_str!("dense_e200.hex").trim());
    assert_eq!(count(&dense), Ok(200));
    let mut max = [0u8; REGISTERS];
    merge(&mut max, &sparse).unwrap();
    assert_eq!(count_registers(&max), 200);
    assert_eq!(dense_registers(&dense), max.to_vec());
}

#[test]
fn sparse_turns_dense_past_the_byte_limit() {
    let mut value = new_sparse();
    add_all(&mut value, (1..=3000).map(|i| format!("x{i}")));
    assert_eq!(validate(&value), Ok(Encoding::Dense));
    // redis-server 7.0 says 2985 for the same elements.
    assert_eq!(count(&value), Ok(2985));
    let mut small = new_sparse();
    for i in 0..50 {
        add(&mut small, format!("{i}").as_bytes(), 30).unwrap();
    }
    assert_eq!(validate(&small), Ok(Encoding::Dense));
}

#[test]
fn validation_and_corruption() {
    assert_eq!(validate(b"HYLL"), Err(NotHll));
    let mut value = new_sparse();
    value[0] = b'0';
    assert_eq!(validate(&value), Err(NotHll));
    let mut value = new_sparse();
    value[4] = b'x';
    assert_eq!(validate(&value), Err(NotHll));
    value[4] = 0;
    assert_eq!(validate(&value), Err(NotHll), "dense of the wrong length");
    let mut value = new_sparse();
    value.extend_from_slice(b"hello");
    assert_eq!(validate(&value), Ok(Encoding::Sparse));
    assert_eq!(count(&value), Err(Corrupt));
    let mut max = [0u8; REGISTERS];
    assert_eq!(merge(&mut max, &value), Err(Corrupt));
    assert_eq!(to_dense(&mut value), Err(Corrupt));
}

#[test]
fn cache_bit() {
    let mut value = new_sparse();
    assert_eq!(cached(&value), Some(0));
    invalidate_cache(&mut value);
    assert_eq!(cached(&value), None);
    set_cache(&mut value, 42);
    assert_eq!(cached(&value), Some(42));
}

#[test]
fn registers_pack_six_bits() {
    let mut registers = vec![0u8; DENSE_SIZE - HEADER];
    for i in 0..REGISTERS {
        dense_set(&mut registers, i, (i % 64) as u8);
    }
    for i in 0..REGISTERS {
        assert_eq!(dense_get(&registers, i), (i % 64) as u8);
    }
}
