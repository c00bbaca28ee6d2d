// client.ts calls flowd's API through the types openapi-typescript generates from the served
// document (flowd.d.ts, made by scripts/lint-openapi.sh) with openapi-fetch. It is compiled,
// never run: a strict tsc proves that requests written as the document describes them type-check
// and that answers and webhook payloads read as it describes them.
import createClient from "openapi-fetch";
import type { components, paths, webhooks } from "./flowd.js";

type FlowEvent = NonNullable<webhooks["flowEvent"]["post"]["requestBody"]>["content"]["application/json"];
type EndpointDisabledEvent = NonNullable<webhooks["endpointDisabled"]["post"]["requestBody"]>["content"]["application/json"];

export async function createRetrieveAndList(baseUrl: string, token: string): Promise<string[]> {
  const api = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });

  const created = await api.POST("/api/flows", {
    params: { header: { "Idempotency-Key": "order-42" } },
    body: { nationalId: "12345678901", lastName: "Nordmann", redirectUrl: "https://bank.example/done" },
  });
  if (!created.data) {
    throw new Error(`create: ${created.error.title}`);
  }
  const flowId: string = created.data.flowId;

  const got = await api.GET("/api/flows/{flowId}", { params: { path: { flowId } } });
  if (!got.data) {
    throw new Error(`retrieve: ${got.error?.title ?? got.response.status}`);
  }
  const status: components["schemas"]["ConsentStatus"] = got.data.flow.consent.status;

  const page = await api.GET("/api/flows", { params: { query: { limit: 10 } } });
  const ids = (page.data?.data ?? []).map((f) => f.id);

  // A new endpoint without enabled: it is enabled unless the body says otherwise.
  const endpoint: components["schemas"]["NewWebhookEndpoint"] = { url: "https://hooks.bank.example/flowd" };
  const registered = await api.POST("/api/webhook-endpoints", { body: endpoint });
  if (!registered.data) {
    throw new Error(`register: ${registered.error?.title ?? registered.response.status}`);
  }
  return [flowId, status, ...ids];
}

// describe reads a webhook delivery's body, and an event of the events API, by their types.
export function describe(delivery: FlowEvent | EndpointDisabledEvent, listed: components["schemas"]["EventItem"]): string {
  const about = delivery.type === "endpoint.disabled" ? delivery.data.endpointId : delivery.data.flowId;
  const data: components["schemas"]["EventItem"]["data"] = listed.data;
  const listedAbout = "flowId" in data ? data.flowId : "endpointId" in data ? data.endpointId : data.organizationId;
  return `${delivery.type} ${about} ${delivery.timestamp}; listed ${listed.type} ${listedAbout}`;
}
