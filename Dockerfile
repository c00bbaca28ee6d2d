# flowd: a static binary on a distroless, non-root base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The repository's history stays out of the image's context (.dockerignore):
# `make docker` passes what `flowd version` prints.
ARG VERSION=
ARG COMMIT=
ARG BUILD_TIME=
RUN CGO_ENABLED=0 go build -trimpath -o /out/flowd \
    -ldflags="-s -w -X github.com/flowd/flowd/internal/version.stampedVersion=${VERSION} -X github.com/flowd/flowd/internal/version.stampedCommit=${COMMIT} -X github.com/flowd/flowd/internal/version.stampedBuildTime=${BUILD_TIME}" \
    ./cmd/flowd

FROM gcr.io/distroless/static-debian12:nonroot
# The OCI annotations of the image (docker inspect, registries, scanners),
# from the stamps `flowd version` prints.
ARG VERSION=
ARG COMMIT=
ARG BUILD_TIME=
LABEL org.opencontainers.image.title="flowd" \
      org.opencontainers.image.description="Consent flows: an API, consent pages and signed webhooks" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${BUILD_TIME}"
COPY --from=build /out/flowd /flowd
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/flowd"]
CMD ["serve"]
