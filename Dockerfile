# flowd: a static binary on a distroless, non-root base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/flowd ./cmd/flowd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/flowd /flowd
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/flowd"]
CMD ["serve"]
