/**
 * Invariants of the Kubernetes base (deploy/kubernetes), checked by parsing:
 * no cluster is needed. What a wrong manifest would cost in production (a
 * probe on a port nobody listens on, a backend reachable around the gateway,
 * a root container, a route to a Service that does not exist) fails here.
 */
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parseRouteMap } from '@scoped/gateway/route-map'
import { isManifest, kubernetesDir, parseYamlDocument, parseYamlDocuments, readProjectFile, resolvePort, selects } from './deploy-files.js'
import { projectRoot } from '../helpers/processes.js'
import type {
  Container,
  Deployment,
  HorizontalPodAutoscaler,
  Job,
  Kustomization,
  Manifest,
  NetworkPolicy,
  PodDisruptionBudget,
  PodTemplate,
  Service,
} from './deploy-files.js'
import { rawRoutes, routeLimits, routeShapes, withoutTlsFiles } from './route-files.js'

const kustomization = parseYamlDocument(readProjectFile('deploy/kubernetes/kustomization.yaml'), 'kustomization.yaml') as Kustomization
const resourceFiles = kustomization.resources ?? []
const generatedFiles = (kustomization.configMapGenerator ?? []).flatMap((generator) => generator.files ?? [])

const manifests: Manifest[] = resourceFiles.flatMap((file) =>
  parseYamlDocuments(readProjectFile(`deploy/kubernetes/${file}`), file).map((document) => {
    if (!isManifest(document)) throw new Error(`${file}: a document without kind and metadata`)
    return document
  }),
)

function ofKind<T extends Manifest>(kind: T['kind']): T[] {
  return manifests.filter((manifest): manifest is T => manifest.kind === kind)
}

const deployments = ofKind<Deployment>('Deployment')
const jobs = ofKind<Job>('Job')
const services = ofKind<Service>('Service')
const networkPolicies = ofKind<NetworkPolicy>('NetworkPolicy')
const autoscalers = ofKind<HorizontalPodAutoscaler>('HorizontalPodAutoscaler')
const disruptionBudgets = ofKind<PodDisruptionBudget>('PodDisruptionBudget')

function deployment(name: string): Deployment {
  const found = deployments.find((candidate) => candidate.metadata.name === name)
  if (found === undefined) throw new Error(`no Deployment named ${name}`)
  return found
}

const gateway = deployment('gateway')
const backends = [deployment('agency-service'), deployment('resource-service')]
const podTemplates: Array<[string, PodTemplate]> = [
  ...deployments.map((d): [string, PodTemplate] => [`Deployment ${d.metadata.name}`, d.spec.template]),
  ...jobs.map((j): [string, PodTemplate] => [`Job ${j.metadata.name}`, j.spec.template]),
]

function containerOf(workload: Deployment): Container {
  const [container, ...others] = workload.spec.template.spec.containers
  if (container === undefined || others.length > 0) throw new Error(`${workload.metadata.name}: expected exactly one container`)
  return container
}

function envValue(container: Container, name: string): string | undefined {
  return container.env?.find((variable) => variable.name === name)?.value
}

t.test('kustomization.yaml lists every file of the folder, and every file it lists exists', async (t) => {
  const listed = new Set([...resourceFiles, ...generatedFiles, 'kustomization.yaml'])
  const present = readdirSync(kubernetesDir).filter((file) => /\.ya?ml$/.test(file))
  t.same(
    present.filter((file) => !listed.has(file)),
    [],
    'no manifest is left out of the base',
  )
  for (const file of listed) t.ok(existsSync(join(kubernetesDir, file)), `${file} exists`)
  t.equal(new Set(resourceFiles).size, resourceFiles.length, 'no file is listed twice')
  t.notOk('namePrefix' in kustomization || 'nameSuffix' in kustomization, 'no name prefix: routes.yaml names the Services')
  t.notOk('commonLabels' in kustomization, 'labels stay as written, so the selectors checked here are the ones applied')
})

t.test('the base holds the expected objects', async (t) => {
  t.same(deployments.map((d) => d.metadata.name).sort(), ['agency-service', 'gateway', 'resource-service'])
  t.same(
    jobs.map((j) => j.metadata.name),
    ['migrate'],
  )
  t.same(services.map((s) => s.metadata.name).sort(), ['agency-service', 'gateway', 'resource-service'])
  const names = manifests.map((m) => `${m.kind}/${m.metadata.name}`)
  t.equal(new Set(names).size, names.length, 'no two objects share a kind and a name')
  t.notOk(
    manifests.some((m) => m.kind === 'Secret'),
    'no Secret is committed: the operator creates them (docs/operations.md)',
  )
})

t.test('the migration Job runs the migrate command of the CLI', async (t) => {
  const [job] = jobs
  t.same(job?.spec.template.spec.containers[0]?.command, ['node', 'agency-service/dist/ctl.js', 'migrate'])
  t.ok(existsSync(join(projectRoot, 'agency-service/src/ctl.ts')), 'the compiled CLI comes from agency-service/src/ctl.ts')
})

t.test('every Deployment runs a compiled entry point of its own package', async (t) => {
  for (const workload of deployments) {
    const name = workload.metadata.name
    const command = containerOf(workload).command ?? []
    t.same([command[0], command.at(-1)], ['node', `${name}/dist/main.js`], name)
    t.ok(
      command.slice(1, -1).every((flag) => /^--max-old-space-size=\d+$/.test(flag)),
      `${name}: node flags on the command line, not in NODE_OPTIONS`,
    )
  }
})

t.test('every Deployment selects exactly its own pods', async (t) => {
  for (const workload of deployments) {
    const name = workload.metadata.name
    t.ok(selects(workload.spec.selector, workload.spec.template.metadata.labels), `${name} selects its template`)
    for (const other of deployments.filter((d) => d !== workload)) {
      t.notOk(selects(workload.spec.selector, other.spec.template.metadata.labels), `${name} does not select ${other.metadata.name}`)
    }
  }
})

/** The port the probes reach: the gateway's operations listener, the backends' health listeners (they cannot present the gateway's certificate). */
const probedPorts: Array<[string, string, number]> = [
  ['gateway', 'GATEWAY_ADMIN_PORT', 9090],
  ['agency-service', 'AGENCY_SERVICE_HEALTH_PORT', 4011],
  ['resource-service', 'RESOURCE_SERVICE_HEALTH_PORT', 4012],
]

for (const [name, portVariable, port] of probedPorts) {
  t.test(`${name}: readiness /readyz and liveness /healthz on port ${port}, where it listens`, async (t) => {
    const container = containerOf(deployment(name))
    const containers = [container]
    t.equal(container.readinessProbe?.httpGet?.path, '/readyz')
    t.equal(resolvePort(container.readinessProbe?.httpGet?.port, containers), port)
    t.equal(container.livenessProbe?.httpGet?.path, '/healthz')
    t.equal(resolvePort(container.livenessProbe?.httpGet?.port, containers), port)
    if (container.startupProbe !== undefined) {
      t.equal(container.startupProbe.httpGet?.path, '/healthz')
      t.equal(resolvePort(container.startupProbe.httpGet?.port, containers), port)
    }
    t.equal(envValue(container, portVariable), String(port), `${portVariable} is the probed port`)
    const hostVariable = portVariable.replace(/(_HEALTH)?_PORT$/, '_HOST')
    t.equal(envValue(container, hostVariable), '0.0.0.0', `${hostVariable} lets the kubelet reach the pod IP`)
  })
}

for (const [label, template] of podTemplates) {
  t.test(`${label}: non-root, no privilege escalation, read-only root, resource limits`, async (t) => {
    const pod = template.spec
    t.equal(pod.securityContext?.runAsNonRoot, true, 'pod runAsNonRoot')
    t.ok((pod.securityContext?.runAsUser ?? 0) > 0, 'pod runs as a numeric non-root user')
    t.equal(pod.automountServiceAccountToken, false, 'no Kubernetes API token in the pod')
    t.notOk(pod.hostNetwork === true || pod.hostPID === true, 'no host namespaces')
    for (const container of [...pod.containers, ...(pod.initContainers ?? [])]) {
      const security = container.securityContext
      t.equal(security?.runAsNonRoot, true, `${container.name}: runAsNonRoot`)
      t.ok((security?.runAsUser ?? pod.securityContext?.runAsUser ?? 0) > 0, `${container.name}: non-root uid`)
      t.equal(security?.allowPrivilegeEscalation, false, `${container.name}: allowPrivilegeEscalation false`)
      t.not(security?.privileged, true, `${container.name}: not privileged`)
      t.same(security?.capabilities?.drop, ['ALL'], `${container.name}: drops every capability`)
      t.same(security?.capabilities?.add ?? [], [], `${container.name}: adds none`)
      t.equal(security?.readOnlyRootFilesystem, true, `${container.name}: read-only root filesystem`)
      t.ok(container.resources?.limits?.cpu, `${container.name}: cpu limit`)
      t.ok(container.resources?.limits?.memory, `${container.name}: memory limit`)
      t.ok(container.resources?.requests?.cpu, `${container.name}: cpu request`)
      t.ok(container.resources?.requests?.memory, `${container.name}: memory request`)
      t.equal(container.image, 'scoped-api', `${container.name}: the project image, tagged by kustomization.yaml`)
    }
  })
}

t.test('secrets come from Secrets, never from literal values', async (t) => {
  for (const [label, template] of podTemplates) {
    for (const container of template.spec.containers) {
      for (const variable of container.env ?? []) {
        if (/SECRET|PASSWORD|DATABASE_URL|REDIS_URL/.test(variable.name)) {
          t.equal(variable.value, undefined, `${label} ${variable.name} has no literal value`)
          t.ok(variable.valueFrom?.secretKeyRef?.name, `${label} ${variable.name} comes from a Secret`)
        }
      }
      t.equal(container.envFrom, undefined, `${label}: every variable is named, none pulled in wholesale`)
    }
  }
  // Secrets by audience: each backend its own verification secret, the gateway the signing secrets of the
  // backends it signs for and the cache secret; nobody the master.
  const needs: Array<[string, string[]]> = [
    ['gateway', ['DATABASE_URL', 'REDIS_URL', 'AGENCY_SERVICE_SIGNING_SECRET', 'RESOURCE_SERVICE_SIGNING_SECRET', 'KEY_CACHE_SECRET']],
    ['agency-service', ['DATABASE_URL', 'REDIS_URL', 'AGENCY_SERVICE_SIGNING_SECRET', 'AGENCY_SERVICE_SIGNING_SECRET_PREVIOUS', 'KEY_CACHE_SECRET']],
    ['resource-service', ['DATABASE_URL', 'RESOURCE_SERVICE_SIGNING_SECRET', 'RESOURCE_SERVICE_SIGNING_SECRET_PREVIOUS']],
  ]
  for (const [name, variables] of needs) {
    const env = containerOf(deployment(name)).env ?? []
    for (const variable of variables)
      t.ok(
        env.some((v) => v.name === variable && v.valueFrom?.secretKeyRef),
        `${name} gets ${variable}`,
      )
    const secrets = env.filter((v) => /SECRET/.test(v.name)).map((v) => v.name)
    t.same(secrets.sort(), variables.filter((v) => /SECRET/.test(v)).sort(), `${name} gets no secret beyond those`)
  }
  const previous = backends.flatMap((b) => containerOf(b).env ?? []).filter((v) => v.name.endsWith('_SIGNING_SECRET_PREVIOUS'))
  t.equal(previous.length, 2)
  t.ok(
    previous.every((v) => v.valueFrom?.secretKeyRef?.optional === true),
    'the previous signing secrets are optional (set only while rotating)',
  )
  for (const [variable, backend] of [
    ['AGENCY_SERVICE_SIGNING_SECRET', 'agency-service'],
    ['RESOURCE_SERVICE_SIGNING_SECRET', 'resource-service'],
  ] as const) {
    const refs = [gateway, deployment(backend)].map((d) => containerOf(d).env?.find((v) => v.name === variable)?.valueFrom?.secretKeyRef)
    t.equal(new Set(refs.map((ref) => `${ref?.name}/${ref?.key}`)).size, 1, `the gateway and ${backend} read the same ${variable}`)
  }
})

t.test('the gateway reads TLS from a Secret and the route map from the generated ConfigMap', async (t) => {
  const container = containerOf(gateway)
  const volumes = gateway.spec.template.spec.volumes ?? []
  function volumeHolding(path: string | undefined) {
    const mount = container.volumeMounts?.find((m) => path?.startsWith(`${m.mountPath}/`))
    return { mount, volume: volumes.find((v) => v.name === mount?.name) }
  }
  for (const variable of ['TLS_CERT_FILE', 'TLS_KEY_FILE']) {
    const { mount, volume } = volumeHolding(envValue(container, variable))
    t.ok(volume?.secret?.secretName, `${variable} lies in a mounted Secret (else the gateway would write a development certificate)`)
    t.equal(mount?.readOnly, true, `${variable}: read-only mount`)
  }
  const routesFile = envValue(container, 'ROUTES_FILE')
  const { mount, volume } = volumeHolding(routesFile)
  const routeGenerator = kustomization.configMapGenerator?.find((generator) => generator.name === volume?.configMap?.name)
  t.ok(routeGenerator, 'ROUTES_FILE lies in the ConfigMap that kustomization.yaml generates')
  t.ok(routeGenerator?.files?.includes(routesFile?.slice((mount?.mountPath.length ?? 0) + 1) ?? ''), 'the file name is a key of that ConfigMap')
})

t.test("the ConfigMap's routes.yaml is a valid route map with upstreams at the backend Services", async (t) => {
  const text = readProjectFile('deploy/kubernetes/routes.yaml')
  t.doesNotThrow(() => parseRouteMap(withoutTlsFiles(text, 'deploy/kubernetes/routes.yaml'), 'deploy/kubernetes/routes.yaml'), 'the gateway accepts it')
  const routes = rawRoutes(text, 'deploy/kubernetes/routes.yaml')
  t.ok(routes.length > 0)
  for (const route of routes) {
    const upstream = new URL(route.upstream)
    const service = services.find((s) => s.metadata.name === upstream.hostname)
    t.ok(service, `${route.prefix}: ${upstream.hostname} is a Service of the base`)
    t.ok(
      service?.spec.ports.some((p) => p.port === Number(upstream.port)),
      `${route.prefix}: port ${upstream.port} is a port of that Service`,
    )
    t.not(upstream.hostname, 'gateway', `${route.prefix}: never routes back to the gateway`)
  }
  const defaults = readProjectFile('deploy/routes.yaml')
  t.same(routeShapes(routes), routeShapes(rawRoutes(defaults, 'deploy/routes.yaml')), 'the same routes as deploy/routes.yaml')
  t.same(routeLimits(text, 'deploy/kubernetes/routes.yaml'), routeLimits(defaults, 'deploy/routes.yaml'), 'and the same rate limits')
})

t.test('TLS inside by default: cert-manager makes each certificate into a Secret that only its Deployment mounts', async (t) => {
  const certificates = manifests.filter((m) => m.kind === 'Certificate') as Array<
    Manifest & { spec: { secretName: string; isCA?: boolean; dnsNames?: string[]; usages?: string[]; issuerRef: { name: string } } }
  >
  const issuers = manifests.filter((m) => m.kind === 'Issuer') as Array<Manifest & { spec: { ca?: { secretName: string } } }>
  const ca = certificates.find((c) => c.spec.isCA === true)
  t.ok(ca, 'a private CA')
  const caIssuer = issuers.find((issuer) => issuer.spec.ca?.secretName === ca?.spec.secretName)
  t.ok(caIssuer, 'an Issuer signs with it')
  const secretOf = (workload: Deployment): string | undefined => {
    const mount = containerOf(workload).volumeMounts?.find((m) => m.mountPath === '/etc/scoped-api/internal-tls')
    return workload.spec.template.spec.volumes?.find((v) => v.name === mount?.name)?.secret?.secretName
  }
  for (const workload of [...backends, gateway]) {
    const name = workload.metadata.name
    const certificate = certificates.find((c) => c.spec.secretName === secretOf(workload))
    t.ok(certificate, `${name} mounts a Certificate's Secret at /etc/scoped-api/internal-tls`)
    t.equal(certificate?.spec.issuerRef.name, caIssuer?.metadata.name, `${name}: issued by the private CA`)
    t.same(
      certificate?.spec.usages,
      ['digital signature', name === 'gateway' ? 'client auth' : 'server auth'],
      `${name}: ${name === 'gateway' ? 'a client' : 'a server'} certificate only`,
    )
    if (name !== 'gateway') t.same(certificate?.spec.dnsNames, [name], `${name}: named as the gateway dials it`)
    for (const other of [...backends, gateway].filter((candidate) => candidate !== workload)) {
      t.not(secretOf(other), secretOf(workload), `${name}'s key is not mounted by ${other.metadata.name}`)
    }
    t.notOk(JSON.stringify(workload.spec.template.spec.volumes).includes(ca?.spec.secretName ?? '-'), `${name} does not mount the CA's key`)
  }
  for (const workload of backends) {
    const prefix = workload.metadata.name.toUpperCase().replace('-', '_')
    const container = containerOf(workload)
    t.same(
      [envValue(container, `${prefix}_TLS_CERT_FILE`), envValue(container, `${prefix}_TLS_KEY_FILE`), envValue(container, `${prefix}_TLS_CLIENT_CA_FILE`)],
      ['/etc/scoped-api/internal-tls/tls.crt', '/etc/scoped-api/internal-tls/tls.key', '/etc/scoped-api/internal-tls/ca.crt'],
      `${workload.metadata.name} listens with mutual TLS`,
    )
  }
  for (const route of rawRoutes(readProjectFile('deploy/kubernetes/routes.yaml'), 'deploy/kubernetes/routes.yaml')) {
    t.match(route.upstream, /^https:\/\//, `${route.prefix}: an https upstream`)
    t.same(
      route.tls,
      { caFile: '/etc/scoped-api/internal-tls/ca.crt', certFile: '/etc/scoped-api/internal-tls/tls.crt', keyFile: '/etc/scoped-api/internal-tls/tls.key' },
      `${route.prefix}: the internal CA and the gateway's client certificate`,
    )
  }
})

t.test('every Service selects one Deployment and targets a port it listens on', async (t) => {
  for (const service of services) {
    const targets = deployments.filter((d) => selects({ matchLabels: service.spec.selector }, d.spec.template.metadata.labels))
    t.equal(targets.length, 1, `${service.metadata.name} selects exactly one Deployment`)
    const containers = targets[0]?.spec.template.spec.containers ?? []
    for (const port of service.spec.ports) {
      const target = resolvePort(port.targetPort ?? port.port, containers)
      t.ok(
        containers.some((c) => c.ports?.some((p) => p.containerPort === target)),
        `${service.metadata.name}:${port.port} reaches a container port`,
      )
    }
  }
  const gatewayService = services.find((s) => s.metadata.name === 'gateway')
  const adminPort = Number(envValue(containerOf(gateway), 'GATEWAY_ADMIN_PORT'))
  t.notOk(
    gatewayService?.spec.ports.some((p) => resolvePort(p.targetPort ?? p.port, [containerOf(gateway)]) === adminPort),
    'the operations port is not published with the API',
  )
})

t.test('NetworkPolicies: the backends accept traffic only from the gateway pods', async (t) => {
  for (const backend of backends) {
    const name = backend.metadata.name
    const podLabels = backend.spec.template.metadata.labels
    const policies = networkPolicies.filter((p) => selects(p.spec.podSelector, podLabels))
    t.ok(policies.length > 0, `a NetworkPolicy selects the ${name} pods`)
    const listenPort = containerOf(backend).ports?.[0]?.containerPort
    for (const policy of policies) {
      t.ok(policy.spec.policyTypes?.includes('Ingress'), `${policy.metadata.name} restricts ingress`)
      for (const rule of policy.spec.ingress ?? []) {
        t.ok((rule.from ?? []).length > 0, `${policy.metadata.name}: every rule names its sources`)
        for (const peer of rule.from ?? []) {
          t.equal(peer.namespaceSelector, undefined, `${policy.metadata.name}: no other namespace`)
          t.equal(peer.ipBlock, undefined, `${policy.metadata.name}: no address range`)
          t.ok(selects(peer.podSelector, gateway.spec.template.metadata.labels), `${policy.metadata.name}: the source selector matches the gateway pods`)
          for (const [label, template] of podTemplates.filter(([, template]) => template !== gateway.spec.template)) {
            t.notOk(selects(peer.podSelector, template.metadata.labels), `${policy.metadata.name}: does not admit ${label}`)
          }
        }
        t.same(
          rule.ports?.map((p) => p.port),
          [listenPort],
          `${policy.metadata.name}: only the service port ${listenPort}`,
        )
      }
    }
  }
  for (const policy of networkPolicies) {
    t.ok(
      deployments.some((d) => selects(policy.spec.podSelector, d.spec.template.metadata.labels)),
      `${policy.metadata.name} selects the pods of a Deployment`,
    )
  }
})

t.test('the gateway has a HorizontalPodAutoscaler and a PodDisruptionBudget that match it', async (t) => {
  const autoscaler = autoscalers.find((a) => a.spec.scaleTargetRef.name === 'gateway')
  t.same(autoscaler?.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'gateway' })
  t.ok((autoscaler?.spec.minReplicas ?? 1) >= 2, 'at least two replicas')
  t.ok((autoscaler?.spec.maxReplicas ?? 0) >= (autoscaler?.spec.minReplicas ?? 1), 'max is not below min')
  t.equal(gateway.spec.replicas, undefined, 'the autoscaler alone sets the replica count')
  const budget = disruptionBudgets.find((b) => selects(b.spec.selector, gateway.spec.template.metadata.labels))
  t.ok(budget, 'a PodDisruptionBudget selects the gateway pods')
  for (const other of backends) t.notOk(budget && selects(budget.spec.selector, other.spec.template.metadata.labels), `not ${other.metadata.name}`)
  t.ok(budget?.spec.minAvailable !== undefined || budget?.spec.maxUnavailable !== undefined, 'the budget sets a bound')
  const container = containerOf(gateway)
  t.ok(
    container.env?.some((v) => v.name === 'REDIS_URL' && v.valueFrom?.secretKeyRef),
    'several replicas need REDIS_URL for the shared cache and immediate revocation',
  )
})

t.test('least privilege: each service reads its own database login; only the migration Job the owner', async (t) => {
  const own: Array<[string, string]> = [
    ['gateway', 'gateway-database-url'],
    ['agency-service', 'agency-service-database-url'],
    ['resource-service', 'resource-service-database-url'],
  ]
  for (const [name, key] of own) {
    const ref = containerOf(deployment(name)).env?.find((v) => v.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef
    t.same({ name: ref?.name, key: ref?.key }, { name: 'scoped-api-datastores', key }, `${name}: DATABASE_URL is its own key of the Secret`)
  }
  for (const job of jobs) {
    const container = job.spec.template.spec.containers[0]
    t.equal(
      container?.env?.find((v) => v.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef?.key,
      'database-url',
      `Job ${job.metadata.name}: the migrating owner`,
    )
  }
  for (const [label, template] of podTemplates) {
    const volume = template.spec.volumes?.find((v) => v.name === 'postgres-ca')
    t.match(volume?.secret, { secretName: 'scoped-api-postgres-ca', optional: true }, `${label}: Postgres' CA from an optional Secret`)
    t.ok(
      template.spec.containers.every((c) =>
        c.volumeMounts?.some((m) => m.name === 'postgres-ca' && m.mountPath === '/etc/scoped-api/postgres-ca' && m.readOnly === true),
      ),
      `${label}: mounted read-only where sslrootcert points`,
    )
  }
})
