//! The Catalog as an actor: what a list arriving costs.

use std::path::Path;

use rmcp::model::Prompt;
use serde_json::json;

use super::*;

/// How many tool definitions the Catalog has had hashed so far.
#[derive(Message)]
#[rtype(result = "u64")]
struct ToolDefinitionsHashed;

impl Handler<ToolDefinitionsHashed> for Catalog {
    type Result = u64;
    fn handle(&mut self, _: ToolDefinitionsHashed, _: &mut Context<Self>) -> u64 {
        self.tool_definitions_hashed
    }
}

fn tool(name: &str) -> Tool {
    let schema = json!({"type": "object"})
        .as_object()
        .cloned()
        .unwrap_or_default();
    Tool::new(name.to_string(), format!("Does {name}."), Arc::new(schema))
}

fn offered(prompt: &str) -> Offered {
    Offered {
        prompts: vec![Prompt::new(prompt, Some("Says hi."), None)],
        ..Offered::default()
    }
}

/// One configured server `fx`, integrity `pin`.
fn servers() -> SetServers {
    let text = json!({"mcpServers": {"fx": {"command": "fx"}}}).to_string();
    let specs = crate::config::parse(&text, Path::new("t.json"), &|_| None)
        .expect("test config parses")
        .servers;
    let servers = specs
        .into_iter()
        .map(|spec| {
            let link = Arc::new(ServerLink::new(spec.id.clone(), spec.timeout, None));
            (Arc::new(spec), link)
        })
        .collect();
    SetServers {
        servers,
        discovery_hot: Vec::new(),
        cached: HashMap::new(),
        renamed: HashMap::new(),
        integrity: IntegrityMode::Pin,
    }
}

#[test]
fn an_offers_only_change_hashes_no_tool() {
    actix::System::new().block_on(async {
        let published = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
        let catalog = Catalog::new(published).start();
        catalog.send(servers()).await.expect("catalog runs");
        let tools = vec![tool("a"), tool("b"), tool("c")];
        let discovered = |offered| ToolsDiscovered {
            server: "fx".into(),
            tools: tools.clone(),
            offered: Some(offered),
        };
        catalog
            .send(discovered(offered("hi")))
            .await
            .expect("catalog runs");
        let first = catalog
            .send(ToolDefinitionsHashed)
            .await
            .expect("catalog runs");
        assert_eq!(first, 3, "the first list hashes each tool once");

        // The prompts change alone, by list_changed...
        let change = OffersDiscovered {
            server: "fx".into(),
            offered: offered("hello"),
        };
        catalog.send(change).await.expect("catalog runs");
        // ...and with a re-list of the same tools (a restart).
        catalog
            .send(discovered(offered("hey")))
            .await
            .expect("catalog runs");
        let after = catalog
            .send(ToolDefinitionsHashed)
            .await
            .expect("catalog runs");
        assert_eq!(after, first, "an offers-only change hashed tools again");

        // A tool that changes is hashed again (with its list).
        let mut changed = tools.clone();
        changed.push(tool("d"));
        let relist = ToolsDiscovered {
            server: "fx".into(),
            tools: changed,
            offered: None,
        };
        catalog.send(relist).await.expect("catalog runs");
        let last = catalog
            .send(ToolDefinitionsHashed)
            .await
            .expect("catalog runs");
        assert_eq!(last, first + 4);
    });
}
