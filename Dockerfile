# The sluice binary, built from this repository: a static binary (no cgo) in
# a distroless image with no shell, run as the image's unprivileged user.
#
#   docker build -t sluice .
#   docker run --rm sluice run billing --brokers kafka:9092 --http 0.0.0.0:9100
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sluice ./cmd/sluice \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /sluice
# The default state.dir, owned by the user that writes it (65532 is
# distroless's nonroot). docker-compose.yml mounts a tmpfs over it.
COPY --from=build --chown=65532:65532 /out/state /state
ENV SLUICE_STATE_DIR=/state
USER nonroot:nonroot
# sluice run --http serves /metrics, /healthz and /readyz here by convention.
EXPOSE 9100
ENTRYPOINT ["/sluice"]
