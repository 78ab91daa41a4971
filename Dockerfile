# The agent's image: a static binary on distroless, as non-root.
#
#   docker build -t ghcr.io/driftless/driftless:dev --build-arg VERSION=dev .
#
# The Deployment of config/manager (and `driftless install`) runs it with a
# read-only root filesystem, runAsNonRoot and an emptyDir at /tmp for the
# git checkouts.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# The tag leaves out Kustomize's Go plugin loader, which driftless never runs.
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -tags kustomize_disable_go_plugin_support \
    -ldflags "-s -w -X github.com/driftless/driftless/internal/cli.version=${VERSION} -X github.com/driftless/driftless/internal/cli.commit=${COMMIT}" \
    -o /out/driftless ./cmd/driftless

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/driftless /driftless
USER nonroot:nonroot
ENTRYPOINT ["/driftless"]
CMD ["agent"]
