// kube-proxy's endpoint / service change counters. kpng counts the EndpointSlice and Service objects
// its source hands over (adds, updates, deletes); a change is pending until a sync that started after
// it succeeds, or until the store settles with nothing left to apply (a no-op update).
export interface ChangeCounts { endpointsTotal: number; servicesTotal: number; endpointsPending: number; servicesPending: number }

export class ChangeCounters {
  readonly counts: ChangeCounts = { endpointsTotal: 0, servicesTotal: 0, endpointsPending: 0, servicesPending: 0 };
  private inFlight = { endpoints: 0, services: 0 };

  onObject(kind: string): void {
    if (kind === 'EndpointSlice') { this.counts.endpointsTotal++; this.counts.endpointsPending++; }
    else if (kind === 'Service') { this.counts.servicesTotal++; this.counts.servicesPending++; }
  }

  /** A sync starts: what is pending now is what it carries. */
  syncStarted(): void {
    this.inFlight = { endpoints: this.counts.endpointsPending, services: this.counts.servicesPending };
  }

  syncSucceeded(): void {
    this.counts.endpointsPending = Math.max(0, this.counts.endpointsPending - this.inFlight.endpoints);
    this.counts.servicesPending = Math.max(0, this.counts.servicesPending - this.inFlight.services);
    this.inFlight = { endpoints: 0, services: 0 };
  }

  /** The state the sink has is the current one: nothing is pending. */
  settled(): void {
    this.counts.endpointsPending = 0;
    this.counts.servicesPending = 0;
  }
}
