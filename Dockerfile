# One image for every process of the stack; the command picks the process:
#   node gateway/dist/main.js            (the default)
#   node agency-service/dist/main.js
#   node resource-service/dist/main.js
#   node agency-service/dist/ctl.js migrate   (and every other ctl command)
#   node gateway/dist/internal-certificates.js <dir> …   (compose's certs job)
# The build stage compiles TypeScript; the runtime stage holds production
# dependencies and compiled JavaScript only, and runs as an unprivileged user.

# Node 24 LTS; the code also runs on Node 20.19+ and 22.13+ (package.json engines).
FROM node:24-slim AS build
WORKDIR /app
# Manifests first, so the dependency layer is reused until the lockfile changes.
COPY package.json package-lock.json tsconfig.json ./
COPY shared/package.json shared/tsconfig.json shared/
COPY gateway/package.json gateway/tsconfig.json gateway/
COPY agency-service/package.json agency-service/tsconfig.json agency-service/
COPY resource-service/package.json resource-service/tsconfig.json resource-service/
RUN npm ci --no-audit --no-fund
COPY shared/src shared/src
COPY gateway/src gateway/src
COPY agency-service/src agency-service/src
COPY resource-service/src resource-service/src
RUN npx tsc -b

FROM node:24-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
# A named user with a fixed numeric id: Kubernetes' runAsNonRoot can only
# verify a numeric USER, and the CLI reads its account name for the audit trail.
RUN groupadd --system --gid 10001 scoped \
 && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home --shell /usr/sbin/nologin scoped
COPY package.json package-lock.json ./
COPY shared/package.json shared/
COPY gateway/package.json gateway/
COPY agency-service/package.json agency-service/
COPY resource-service/package.json resource-service/
# No dependency needs an install script at run time (only the build stage's esbuild has one).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
# Workspace packages resolve each other through their package.json "exports"
# default condition, ./dist/*.js: no TypeScript loader at run time.
COPY --from=build /app/shared/dist shared/dist
COPY --from=build /app/gateway/dist gateway/dist
COPY --from=build /app/agency-service/dist agency-service/dist
COPY --from=build /app/resource-service/dist resource-service/dist
# The console's stylesheet and script, served as files; agency-service finds them at ../../assets/ from dist/console.
COPY agency-service/assets agency-service/assets
COPY shared/migrations shared/migrations
# The list of common passwords that ctl user create refuses (shared/data/README.md).
COPY shared/data shared/data
COPY deploy/routes.yaml deploy/routes.yaml
# The API description the gateway serves at /openapi.json (npm run openapi writes it).
COPY deploy/openapi.json deploy/openapi.json
# The code stays root-owned and read-only for the process. .data is the one
# writable place: the gateway writes its development certificate there when
# TLS_CERT_FILE and TLS_KEY_FILE are unset.
# The internal hop's certificates: the mount points of compose's volumes, owned
# by the process's user (a new volume takes its mount point's owner), and only
# theirs.
RUN mkdir .data && chown 10001:10001 .data \
 && mkdir -p /internal-tls/ca /internal-tls/agency-service /internal-tls/resource-service /internal-tls/gateway /etc/scoped-api/internal-tls \
 && chown 10001:10001 /internal-tls/* /etc/scoped-api/internal-tls \
 && chmod 0700 /internal-tls/* /etc/scoped-api/internal-tls
USER 10001:10001
EXPOSE 8443 8080 9090 4001 4002 4011 4012
CMD ["node", "gateway/dist/main.js"]
