//! The collection types' commands on a shard's store. Each file ports one type's Redis 7.0
//! commands (argument checks in Redis's order, then the key's type, then the work); writes
//! are logged as the command itself (deterministic given the prior state) unless a file says
//! otherwise.

pub(super) mod args;
mod geo;
mod geohash;
mod hash;
mod list;
mod scan;
mod set;
pub(crate) mod stream;
mod zset;
mod zset_ops;

use bytes::Bytes;

use super::value::ValueType;
use super::Store;
use crate::change::{ChangeSink, WriteOp};
use crate::command::{CommandError, TypedCommand, TypedOp as Op};
use crate::reply::Reply;

impl Store {
    pub(in crate::store) fn run_typed<S: ChangeSink>(
        &mut self,
        command: TypedCommand,
        now: u64,
        sink: &mut S,
    ) -> Result<Reply, CommandError> {
        let TypedCommand { op, args } = command;
        let mut cx = Cx {
            store: self,
            now,
            sink,
            op,
        };
        let a = &args[..];
        let reply = match op {
            Op::Type => cx.type_of(a),
            Op::LPush | Op::RPush | Op::LPushX | Op::RPushX => cx.push(a),
            Op::LPop | Op::RPop => cx.pop(a),
            Op::BLPop | Op::BRPop => cx.blocking_pop(a),
            Op::LMPop | Op::BLMPop => cx.mpop(a),
            Op::LRange => cx.lrange(a),
            Op::LLen => cx.llen(a),
            Op::LIndex => cx.lindex(a),
            Op::LSet => cx.lset(a),
            Op::LInsert => cx.linsert(a),
            Op::LRem => cx.lrem(a),
            Op::LTrim => cx.ltrim(a),
            Op::LPos => cx.lpos(a),
            Op::LMove | Op::RPopLPush | Op::BLMove | Op::BRPopLPush => cx.lmove(a),
            Op::HSet | Op::HMSet => cx.hset(a),
            Op::HSetNx => cx.hsetnx(a),
            Op::HGet => cx.hget(a),
            Op::HMGet => cx.hmget(a),
            Op::HGetAll | Op::HKeys | Op::HVals => cx.hgetall(a),
            Op::HDel => cx.hdel(a),
            Op::HExists => cx.hexists(a),
            Op::HLen => cx.hlen(a),
            Op::HIncrBy => cx.hincrby(a),
            Op::HIncrByFloat => cx.hincrbyfloat(a),
            Op::HStrLen => cx.hstrlen(a),
            Op::HRandField => cx.hrandfield(a),
            Op::HScan => cx.hscan(a),
            Op::SAdd => cx.sadd(a),
            Op::SRem => cx.srem(a),
            Op::SMembers => cx.smembers(a),
            Op::SIsMember => cx.sismember(a),
            Op::SMIsMember => cx.smismember(a),
            Op::SCard => cx.scard(a),
            Op::SPop => cx.spop(a),
            Op::SRandMember => cx.srandmember(a),
            Op::SMove => cx.smove(a),
            Op::SInter | Op::SUnion | Op::SDiff => cx.set_algebra(a),
            Op::SInterStore | Op::SUnionStore | Op::SDiffStore => cx.set_algebra_store(a),
            Op::SInterCard => cx.sintercard(a),
            Op::SScan => cx.sscan(a),
            Op::ZAdd => cx.zadd(a),
            Op::ZRem => cx.zrem(a),
            Op::ZScore => cx.zscore(a),
            Op::ZMScore => cx.zmscore(a),
            Op::ZIncrBy => cx.zincrby(a),
            Op::ZCard => cx.zcard(a),
            Op::ZCount => cx.zcount(a),
            Op::ZLexCount => cx.zlexcount(a),
            Op::ZRange
            | Op::ZRangeByScore
            | Op::ZRevRangeByScore
            | Op::ZRangeByLex
            | Op::ZRevRangeByLex
            | Op::ZRevRange => cx.zrange(a),
            Op::ZRank | Op::ZRevRank => cx.zrank(a),
            Op::ZPopMin | Op::ZPopMax => cx.zpop(a),
            Op::ZRangeStore => cx.zrangestore(a),
            Op::ZScan => cx.zscan(a),
            Op::ZRemRangeByScore | Op::ZRemRangeByRank | Op::ZRemRangeByLex => cx.zremrange(a),
            Op::ZRandMember => cx.zrandmember(a),
            Op::ZUnionStore
            | Op::ZInterStore
            | Op::ZDiffStore
            | Op::ZUnion
            | Op::ZInter
            | Op::ZDiff
            | Op::ZInterCard => cx.zsetop(a),
            Op::ZMPop | Op::BZMPop => cx.zmpop(a),
            Op::BZPopMin | Op::BZPopMax => cx.bzpop(a),
            Op::GeoAdd => cx.geoadd(a),
            Op::GeoDist => cx.geodist(a),
            Op::GeoHash => cx.geohash(a),
            Op::GeoPos => cx.geopos(a),
            Op::GeoSearch
            | Op::GeoSearchStore
            | Op::GeoRadius
            | Op::GeoRadiusRo
            | Op::GeoRadiusByMember
            | Op::GeoRadiusByMemberRo => cx.geosearch(a),
            Op::XGroupHelp | Op::XInfoHelp => Ok(stream::help(op)),
            Op::XAdd
            | Op::XRange
            | Op::XRevRange
            | Op::XLen
            | Op::XDel
            | Op::XTrim
            | Op::XSetId
            | Op::XRead
            | Op::XReadGroup
            | Op::XAck
            | Op::XPending
            | Op::XClaim
            | Op::XAutoClaim
            | Op::XGroupCreate
            | Op::XGroupCreateConsumer
            | Op::XGroupDelConsumer
            | Op::XGroupDestroy
            | Op::XGroupSetId
            | Op::XInfoConsumers
            | Op::XInfoGroups
            | Op::XInfoStream => cx.stream_command(a),
        };
        // The vector may be the thread's, lent by the parser: back for the next request.
        crate::command::argv::give_back(args);
        reply
    }
}

/// One command's context: the store, the time, the change sink and which command runs.
pub(super) struct Cx<'a, S> {
    pub store: &'a mut Store,
    pub now: u64,
    pub sink: &'a mut S,
    pub op: Op,
}

impl<S: ChangeSink> Cx<'_, S> {
    fn type_of(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let name = self
            .store
            .lookup(&a[0], self.now, self.sink)
            .map_or("none", |value| value.value_type().name());
        Ok(Reply::simple(name))
    }

    /// Logs the command as the client wrote it.
    pub fn log_as_written(&mut self, a: &[Bytes]) {
        self.log(self.op.name(), a);
    }

    /// Logs `name a[0] a[1..]`.
    pub fn log(&mut self, name: &str, a: &[Bytes]) {
        self.sink.record(WriteOp::Command {
            name,
            key: &a[0],
            args: &a[1..],
        });
    }

    /// The keyspace event of this command's change to `key`, of the class of the key's type,
    /// then the `del` Redis sends when the change emptied the collection.
    pub fn event(&mut self, name: &'static str, key: &[u8]) {
        self.store.notify(self.op.event_class(), name, key);
        self.store.notify_emptied(key);
    }

    pub fn check(&mut self, key: &[u8], kind: ValueType) -> Result<(), CommandError> {
        self.store.check_type(key, kind, self.now, self.sink)
    }
}
