"""grpcio (gRPC's own Python implementation) against the corewire greeter.

Run by tests/grpcio_interop.rs with the interpreter of the venv `cargo xtask setup` makes
(grpcio, grpcio-tools): it generates the stubs from the greeter's .proto files with
grpcio-tools, then checks unary and streaming calls, metadata, gzip, a deadline that expires,
cancelled calls (counted CANCELLED by the server's Prometheus endpoint), an unknown method and
every status code. Exits non-zero, saying what failed, on the first failure.

usage: grpcio_client.py PROTO_DIR OUT_DIR GRPC_ADDR METRICS_ADDR
"""

import sys
import time
import urllib.request

proto_dir, out_dir, addr, metrics = sys.argv[1:5]

from grpc_tools import protoc  # noqa: E402

if protoc.main(["protoc", f"-I{proto_dir}", f"--python_out={out_dir}",
                f"--grpc_python_out={out_dir}", "helloworld.proto", "hellostreams.proto"]) != 0:
    sys.exit("grpc_tools.protoc failed")
sys.path.insert(0, out_dir)

import grpc  # noqa: E402
import hellostreams_pb2 as hs  # noqa: E402
import hellostreams_pb2_grpc as hs_grpc  # noqa: E402
import helloworld_pb2 as hw  # noqa: E402
import helloworld_pb2_grpc as hw_grpc  # noqa: E402

SLOWLY = "/hellostreams.MultiGreeter/SayHelloSlowly"
SAY_HELLOS = "/hellostreams.MultiGreeter/SayHellos"


def check(cond, what):
    if not cond:
        sys.exit(f"FAILED: {what}")
    print(f"ok: {what}")


def count(method, code):
    text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5).read().decode()
    total = 0
    for line in text.splitlines():
        if line.startswith("corewire_rpc_errors_total{") and f'method="{method}"' in line \
                and f'code="{code}"' in line:
            total += int(line.rsplit(" ", 1)[1])
    return total


def wait_count(method, code, n):
    until = time.time() + 5
    while True:
        got = count(method, code)
        if got >= n or time.time() > until:
            return got
        time.sleep(0.02)


channel = grpc.insecure_channel(addr)
greeter = hw_grpc.GreeterStub(channel)
multi = hs_grpc.MultiGreeterStub(channel)

reply = greeter.SayHello(hw.HelloRequest(name="python"), timeout=10)
check(reply.message == "Hello python", "unary SayHello")

reply, call = greeter.SayHello.with_call(hw.HelloRequest(name="meta"),
                                        metadata=[("x-echo", "pong")], timeout=10)
check(dict(call.initial_metadata()).get("x-echo") == "pong", "metadata in and out")

long = "y" * 20000
reply = greeter.SayHello(hw.HelloRequest(name=long), compression=grpc.Compression.Gzip, timeout=10)
check(reply.message == "Hello " + long, "gzip-compressed call")

got = [r.message for r in multi.SayHellos(hs.ManyHellosRequest(name="py", count=40), timeout=10)]
check(got == [f"Hello py #{i}" for i in range(40)], "server streaming, 40 messages in order")

# A deadline that expires (grpc-core also runs its own timer; either side may end it).
started = time.time()
try:
    multi.SayHelloSlowly(hs.SlowHelloRequest(name="late", delay_ms=5000), timeout=0.2)
    check(False, "a late call should fail")
except grpc.RpcError as e:
    check(e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, f"deadline exceeded ({e.code()})")
check(time.time() - started < 4, "the late call ended at its deadline")

# A cancelled unary call: the server drops the handler and counts it.
before = count(SLOWLY, "CANCELLED")
future = multi.SayHelloSlowly.future(hs.SlowHelloRequest(name="gone", delay_ms=60000))
time.sleep(0.2)
future.cancel()
check(future.cancelled(), "the client cancelled the call")
check(wait_count(SLOWLY, "CANCELLED", before + 1) >= before + 1, "server saw the cancel")

# A cancelled stream.
before = count(SAY_HELLOS, "CANCELLED")
stream = multi.SayHellos(hs.ManyHellosRequest(name="forever", count=2**32 - 1, interval_ms=1))
next(stream)
next(stream)
stream.cancel()
check(wait_count(SAY_HELLOS, "CANCELLED", before + 1) >= before + 1, "server saw the stream cancel")

# A method nobody serves.
nope = channel.unary_unary("/helloworld.Greeter/SayGoodbye",
                           request_serializer=hw.HelloRequest.SerializeToString,
                           response_deserializer=hw.HelloReply.FromString)
try:
    nope(hw.HelloRequest(name="x"), timeout=10)
    check(False, "an unknown method should fail")
except grpc.RpcError as e:
    check(e.code() == grpc.StatusCode.UNIMPLEMENTED, f"unknown method: {e.code()}")

# Every status code with its message.
for code in grpc.StatusCode:
    if code == grpc.StatusCode.OK:
        continue
    value = code.value[0]
    message = f"failure {value}: ünïcode & 100%"
    try:
        multi.Fail(hs.FailRequest(code=value, message=message), timeout=10)
        check(False, f"Fail({value}) should fail")
    except grpc.RpcError as e:
        check(e.code() == code, f"status {code.name}")
        if value not in (1, 4, 8):
            check(e.details() == message, f"status {code.name} keeps its message")

print("all grpcio checks passed")
