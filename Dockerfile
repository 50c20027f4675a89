# The sluice binary, built from this repository.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/sluice ./cmd/sluice

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/sluice /sluice
ENTRYPOINT ["/sluice"]
