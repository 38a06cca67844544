import { refusal } from './interpolate.js';
import type { ComposePlan, DependsOn } from './plan.js';

/** One step of the start: a sidecar and what each of its dependencies must have reached first. */
export interface StartStep {
  service: string;
  waitFor: DependsOn[];
}

/**
 * The sidecars in a start order where every `depends_on` comes first (compose starts a service once
 * its dependencies meet their conditions, compose-spec "depends_on"); ties keep the file's order. A
 * cycle is refused, named (`a -> b -> a`), as compose refuses it.
 */
export function startOrder(plan: Pick<ComposePlan, 'services'>): StartStep[] {
  const deps = new Map(plan.services.map((s) => [s.name, s.dependsOn]));
  const state = new Map<string, 'visiting' | 'done'>();
  const steps: StartStep[] = [];
  const visit = (name: string, trail: string[]) => {
    const seen = state.get(name);
    if (seen === 'done') return;
    if (seen === 'visiting') {
      const cycle = [...trail.slice(trail.indexOf(name)), name];
      throw refusal('depends_on', `a cycle: ${cycle.join(' -> ')}`);
    }
    state.set(name, 'visiting');
    for (const d of deps.get(name) ?? []) visit(d.service, [...trail, name]);
    state.set(name, 'done');
    steps.push({ service: name, waitFor: deps.get(name) ?? [] });
  };
  for (const s of plan.services) visit(s.name, []);
  return steps;
}

/**
 * What must hold before `main` starts: the conditions of its own `depends_on`, and every sidecar's
 * healthcheck passing, since Harbor's `docker compose up --detach --wait` (src/harbor/environments/docker/docker.py:553) returns
 * only once each service is running or healthy; main's conditions are met then too.
 */
export function beforeMain(plan: Pick<ComposePlan, 'services' | 'main'>): DependsOn[] {
  const waits: DependsOn[] = plan.main.dependsOn.filter((d) => d.condition === 'service_completed_successfully');
  for (const s of plan.services) if (s.healthcheck) waits.push({ service: s.name, condition: 'service_healthy' });
  for (const d of plan.main.dependsOn) if (!waits.some((w) => w.service === d.service)) waits.push(d);
  return waits;
}

/** The services another waits for with service_completed_successfully: run once, to their end. */
export function oneShotServices(plan: Pick<ComposePlan, 'services' | 'main'>): Set<string> {
  const deps = [...plan.services.flatMap((s) => s.dependsOn), ...plan.main.dependsOn];
  return new Set(deps.filter((d) => d.condition === 'service_completed_successfully').map((d) => d.service));
}
