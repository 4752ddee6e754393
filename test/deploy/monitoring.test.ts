/**
 * The Grafana dashboard (deploy/grafana) and the alerting rules
 * (deploy/prometheus, and the same groups as a PrometheusRule in the
 * Kubernetes base): every query is PromQL that parses (the Prometheus
 * project's own grammar), and every metric it names is one a real gateway
 * replica exports: one is started (with Redis, as in production) and its
 * /metrics scraped. The panels and alerts the operations guide promises are
 * there.
 */
import t from 'tap'
import { parser } from '@prometheus-io/lezer-promql'
import { STALE_AFTER_MS } from '@scoped/shared/key-invalidation'
import { gatewayFixture } from '../gateway/fixture.js'
import { parseYamlDocument, readProjectFile } from './deploy-files.js'
import type { Kustomization } from './deploy-files.js'

interface Target {
  expr: string
}
interface Panel {
  id: number
  type: string
  title: string
  datasource?: { type: string; uid: string }
  targets?: Target[]
}
interface Dashboard {
  uid: string
  title: string
  panels: Panel[]
  templating: { list: Array<{ name: string; type: string; query?: unknown; definition?: string }> }
}
interface Rule {
  alert?: string
  expr: string
  for?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}
interface RuleGroups {
  groups: Array<{ name: string; rules: Rule[] }>
}

const dashboard = JSON.parse(readProjectFile('deploy/grafana/gateway-dashboard.json')) as Dashboard
const alerts = parseYamlDocument(readProjectFile('deploy/prometheus/gateway-alerts.yaml'), 'gateway-alerts.yaml') as RuleGroups
const prometheusRule = parseYamlDocument(readProjectFile('deploy/kubernetes/prometheus-rules.yaml'), 'prometheus-rules.yaml') as {
  apiVersion: string
  kind: string
  metadata: { name: string }
  spec: RuleGroups
}
const kustomization = parseYamlDocument(readProjectFile('deploy/kubernetes/kustomization.yaml'), 'kustomization.yaml') as Kustomization

const panels = dashboard.panels.filter((panel) => panel.type !== 'row')
const rules = alerts.groups.flatMap((group) => group.rules)

/** Grafana's variables replaced by what they stand for, so the expression is plain PromQL. */
function plain(expr: string): string {
  return expr.replaceAll('$__rate_interval', '5m').replaceAll('$instance', '.*')
}

/** The metric names an expression selects, and its syntax errors (as the text around them). */
function analyse(expr: string): { metrics: string[]; errors: string[] } {
  const text = plain(expr)
  const metrics: string[] = []
  const errors: string[] = []
  parser.parse(text).iterate({
    enter(node) {
      if (node.type.isError) errors.push(JSON.stringify(text.slice(Math.max(0, node.from - 10), node.to + 10)))
      if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector') metrics.push(text.slice(node.from, node.to))
    },
  })
  return { metrics, errors }
}

const queries: Array<[string, string]> = [
  ...panels.flatMap((panel) => (panel.targets ?? []).map((target): [string, string] => [`panel "${panel.title}"`, target.expr])),
  ...rules.map((rule): [string, string] => [`alert ${rule.alert}`, rule.expr]),
]

t.test('the dashboard: one Prometheus data source, a query on every panel', async (t) => {
  t.equal(dashboard.uid, 'scoped-api-gateway')
  t.ok(panels.length >= 15)
  const ids = dashboard.panels.map((panel) => panel.id)
  t.equal(new Set(ids).size, ids.length, 'panel ids are unique')
  t.ok(dashboard.templating.list.some((variable) => variable.name === 'datasource' && variable.type === 'datasource' && variable.query === 'prometheus'))
  for (const panel of panels) {
    t.same(panel.datasource, { type: 'prometheus', uid: '${datasource}' }, `${panel.title}: the chosen Prometheus`)
    t.ok((panel.targets ?? []).length > 0, `${panel.title}: has a query`)
  }
})

t.test('the dashboard shows what the operations guide promises', async (t) => {
  const text = (pattern: RegExp): boolean => panels.some((panel) => (panel.targets ?? []).some((target) => pattern.test(target.expr)))
  t.ok(text(/sum by \(route, scope[^)]*\) \(rate\(gateway_requests_total/), 'request outcomes by route and scope')
  t.ok(text(/sum by \(layer\) \(rate\(gateway_key_cache_lookups_total\{[^}]*result="hit"/), 'key-cache hit ratio by layer')
  t.ok(text(/gateway_upstream_duration_seconds_bucket/), 'upstream latency')
  t.ok(text(/gateway_invalidation_log_age_seconds/), 'invalidation lag')
  t.ok(text(/sum by \(source\) \(rate\(gateway_key_invalidations_total/), 'invalidations and acknowledgements by source')
  t.ok(text(/gateway_invalidation_log_polls_total/), 'invalidation log polls')
  t.ok(text(/gateway_invalidation_channel_subscribed/), 'the Redis subscription')
  t.ok(text(/sum by \(limit\) \(rate\(gateway_throttled_requests_total/), 'throttled and rate-limited requests')
  t.ok(text(/gateway_process_resident_memory_bytes/), 'process memory')
  t.ok(text(/sum by \(instance, listener\) \(gateway_connections_open/), 'open connections by listener')
  t.ok(text(/sum by \(listener, reason\) \(rate\(gateway_connections_refused_total/), 'refused connections by listener and reason')
  t.ok(text(/gateway_nodejs_eventloop_lag_p99_seconds/), 'event-loop lag')
})

t.test('the alerting rules: the plain file and the PrometheusRule are the same, in the Kubernetes base', async (t) => {
  t.equal(prometheusRule.apiVersion, 'monitoring.coreos.com/v1')
  t.equal(prometheusRule.kind, 'PrometheusRule')
  t.same(prometheusRule.spec.groups, alerts.groups, 'the same groups and rules')
  t.ok(kustomization.resources?.includes('prometheus-rules.yaml'), 'listed in kustomization.yaml')
  const names = rules.map((rule) => rule.alert)
  t.equal(new Set(names).size, names.length, 'alert names are unique')
  for (const rule of rules) {
    t.ok(rule.alert, 'an alerting rule')
    t.match(rule.labels?.['severity'], /^(critical|warning)$/, `${rule.alert}: a severity`)
    t.ok(rule.annotations?.['summary'] && rule.annotations['description'], `${rule.alert}: a summary and a description`)
    if (rule.for !== undefined) t.match(rule.for, /^[0-9]+[smh]$/, `${rule.alert}: a duration`)
  }
  const expressions = (pattern: RegExp): boolean => rules.some((rule) => pattern.test(rule.expr))
  t.ok(expressions(/gateway_ready == 0/), 'a replica not ready')
  t.ok(expressions(/sum\(gateway_ready\)/), 'no replica ready')
  t.ok(
    expressions(/outcome=~"upstream-error\|upstream-timeout\|upstream-busy\|unavailable\|error"\}\[5m\]\)\) \/ sum\(rate\(gateway_requests_total\[5m\]\)\) > /),
    'the 5xx ratio',
  )
  // The bound past which a replica trusts no cached key (shared/src/key-invalidation.ts).
  t.ok(expressions(new RegExp(`gateway_invalidation_log_age_seconds > ${STALE_AFTER_MS / 1000}$`)), `invalidation log older than ${STALE_AFTER_MS / 1000} s`)
  t.ok(expressions(/gateway_invalidation_log_polls_total\{result="error"\}/), 'invalidation log poll errors')
  t.ok(expressions(/gateway_invalidation_channel_subscribed == 0/), 'the Redis subscription down')
})

t.test('every query parses and names only metrics a gateway replica exports', async (t) => {
  const fixture = await gatewayFixture(t)
  const replica = await fixture.startReplica()
  const key = await fixture.createKey('sub-account')
  // A request of each kind, so that counters with samples are present too (names come from # TYPE lines anyway).
  await replica.client.request('/v1/agents', { headers: { authorization: `Bearer ${key.key}` } })
  await replica.client.request('/v1/agents')
  const text = await (await fetch(`http://127.0.0.1:${replica.ports.admin}/metrics`)).text()
  const exported = new Set<string>()
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    exported.add(name!)
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${name!}${suffix}`)
    if (type === 'summary') for (const suffix of ['_sum', '_count']) exported.add(`${name!}${suffix}`)
  }
  t.ok(exported.has('gateway_invalidation_channel_subscribed'), 'the subscription gauge (a replica with Redis)')
  t.match(text, /^gateway_invalidation_channel_subscribed 1$/m, 'subscribed')
  t.match(text, /^gateway_ready 1$/m, 'ready')
  for (const [where, expr] of queries) {
    const { metrics, errors } = analyse(expr)
    t.same(errors, [], `${where}: PromQL that parses`)
    t.ok(metrics.length > 0, `${where}: selects a metric`)
    for (const metric of metrics) t.ok(exported.has(metric), `${where}: ${metric} is exported`)
  }
  for (const variable of dashboard.templating.list.filter((variable) => variable.type === 'query')) {
    const metric = /label_values\((\w+),/.exec(variable.definition ?? '')?.[1]
    t.ok(metric !== undefined && exported.has(metric), `variable ${variable.name}: ${metric} is exported`)
  }
})
