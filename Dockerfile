# kcoord: a Kafka group coordinator in front of a Kafka cluster.
#   docker build -t kcoord .
#   docker run -p 9092:9092 -p 9093:9093 -p 9100:9100 kcoord \
#     serve --listen 0.0.0.0:9092 --bootstrap-server kafka:9092 --advertised-host localhost --metrics 0.0.0.0:9100
# Port per broker: kcoord tells clients its own listen port (+1, +2, ... for each upstream broker), so
# publish those ports unchanged (host port = container port).
# Build stage: compile kcoord's wheel with its C decoder (src/kcoord/protocol/_cdecode.c); the slim image has no
# compiler, and the runtime image should not carry one.
FROM python:3.11-slim AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
# The repository as the wheel's source, minus what .dockerignore leaves out (tests, bench, deploy, ...):
# every package under src/kcoord/ (protocol, client, coordinator, storage, analytics, and any added
# later) gets in without a list here to keep in step; tests/unit/test_deploy_files.py checks that.
COPY . /src/kcoord/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels /src/kcoord

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY --from=build /wheels/ /tmp/wheels/
# The image must serve with the compiled decoder: fail the build if the wheel came without it.
RUN pip install /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels \
    && python -c "import kcoord.protocol.codegen as c; assert c.DECODER_BACKEND == 'c', c.DECODER_BACKEND" \
    && kcoord --help >/dev/null \
    && kcoord serve --help >/dev/null \
    && useradd --create-home --uid 10001 --user-group kcoord

USER kcoord
WORKDIR /home/kcoord
# 9092: bootstrap + coordinator; 9093: the first upstream broker's port; 9100: /metrics and /healthz.
EXPOSE 9092 9093 9100
# `kcoord health` asks /readyz (every shard loaded, the upstream answering) on the metrics address
# kcoord was started with (its flags, KCOORD_* environment or config file), so a
# `--metrics 0.0.0.0:19100` needs no healthcheck of its own; `kcoord health --live` asks /healthz.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["kcoord", "health"]

ENTRYPOINT ["kcoord"]
CMD ["serve", "--listen", "0.0.0.0:9092", "--metrics", "0.0.0.0:9100"]
