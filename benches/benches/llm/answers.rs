//! The scripted answers of the research run: long, varied, deterministic search results (news
//! bullets, filings notes, competitor figures) grown to a number of tokens, an editor's review
//! and a writer's brief.

use std::fmt::Write as _;

use benches::XorShift;
use model::tokens::{Tokenizer, count};
use serde_json::json;

/// A figure like `412.7`.
fn figure(rng: &mut XorShift, whole: usize) -> String {
    format!("{}.{}", 1 + rng.below(whole), rng.below(10))
}

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const OUTLETS: [(&str, &str); 6] = [
    ("Reuters", "www.reuters.com/business"),
    ("Bloomberg", "www.bloomberg.com/news/articles"),
    ("the Financial Times", "www.ft.com/content"),
    ("TechCrunch", "techcrunch.com"),
    ("The Wall Street Journal", "www.wsj.com/articles"),
    ("CNBC", "www.cnbc.com"),
];
const CUSTOMERS: [&str; 6] =
    ["Northwind Logistics", "Contoso Health", "Fabrikam Energy", "Globex", "Initech", "Umbrella Retail"];
const PRODUCTS: [&str; 4] =
    ["Xyzzy Edge sensors", "XyzzyCloud analytics", "Plugh gateways", "the Xyzzy Fleet platform"];
const CITIES: [&str; 5] = ["Berlin", "Bangalore", "Toronto", "Singapore", "Warsaw"];
const COMPETITORS: [&str; 3] = ["Acme Dynamics", "Frobozz Systems", "Zork Analytics"];
const SEGMENTS: [&str; 4] = ["industrial IoT", "fleet telemetry", "edge analytics", "utility metering"];

/// Bullets from `bullet` until the text has at least `tokens` tokens.
fn grow(tokens: usize, rng: &mut XorShift, mut bullet: impl FnMut(&mut XorShift, usize) -> String) -> String {
    let mut text = String::new();
    let mut n = 0;
    while count(&text, Tokenizer::O200k) < tokens {
        text.push_str(&bullet(rng, n));
        text.push('\n');
        n += 1;
    }
    text
}

fn news_bullet(rng: &mut XorShift, n: usize) -> String {
    let (outlet, site) = OUTLETS[rng.below(OUTLETS.len())];
    let month = rng.below(12);
    let year = 2024 + rng.below(2);
    let event = match rng.below(6) {
        0 => format!(
            "signed a ${} million, {}-year contract with {} to supply {}",
            figure(rng, 400),
            2 + rng.below(5),
            rng.pick(&CUSTOMERS),
            rng.pick(&PRODUCTS)
        ),
        1 => format!(
            "opened a {}-person engineering office in {}, its {} outside the US",
            40 + rng.below(300),
            rng.pick(&CITIES),
            rng.pick(&["second", "third", "fourth"])
        ),
        2 => format!(
            "cut {}% of its sales staff ({} roles) after bookings in {} fell {}% quarter on quarter",
            3 + rng.below(12),
            20 + rng.below(180),
            rng.pick(&["EMEA", "APAC", "Latin America"]),
            figure(rng, 20)
        ),
        3 => format!(
            "raised ${} million in a Series {} round led by {} at a ${} billion valuation",
            40 + rng.below(260),
            rng.pick(&["C", "D", "E"]),
            rng.pick(&["Sequoia", "Tiger Global", "General Atlantic", "SoftBank Vision Fund 2"]),
            figure(rng, 6)
        ),
        4 => format!(
            "recalled {} units of {} after {} customers reported sensor drift above {}%",
            1_000 + rng.below(40_000),
            rng.pick(&PRODUCTS),
            10 + rng.below(200),
            figure(rng, 5)
        ),
        _ => format!(
            "named {} chief financial officer; she ran finance at {} for {} years",
            rng.pick(&["Dana Whitfield", "Priya Raman", "Elena Sokolova", "Maria Okafor"]),
            rng.pick(&CUSTOMERS),
            3 + rng.below(12)
        ),
    };
    format!(
        "- {} {year}: XyzzyCorp {event}, {outlet} reported, citing {} people familiar with the matter. \
         Source: https://{site}/xyzzycorp-{}-{year}-{:02}-{n}",
        MONTHS[month],
        2 + rng.below(4),
        event.split_whitespace().nth(1).unwrap_or("news").trim_matches(|c: char| !c.is_alphanumeric()),
        month + 1
    )
}

fn filings_note(rng: &mut XorShift, n: usize) -> String {
    let year = 2021 + rng.below(4);
    let metric = rng.pick(&[
        "revenue",
        "gross margin",
        "operating loss",
        "free cash flow",
        "R&D expense",
        "deferred revenue",
        "net retention",
    ]);
    format!(
        "FY{year} {metric}: ${} million ({}{}% year over year), per the {} filed {} {}, {}; \
         segment split {}% hardware / {}% software. Source: https://www.sec.gov/Archives/edgar/data/{}/{:06}.htm",
        figure(rng, 900),
        rng.pick(&["+", "-"]),
        figure(rng, 30),
        rng.pick(&["10-K", "10-Q", "8-K", "S-1/A"]),
        MONTHS[rng.below(12)],
        1 + rng.below(28),
        year + 1,
        30 + rng.below(40),
        30 + rng.below(40),
        1_700_000 + rng.below(90_000),
        n * 7919 % 1_000_000
    )
}

fn competitor_bullet(rng: &mut XorShift, n: usize) -> String {
    let competitor = COMPETITORS[n % COMPETITORS.len()];
    let slug = competitor.to_lowercase().replace(' ', "-");
    format!(
        "- {competitor}: FY2024 revenue ${} billion ({}{}% YoY), {} employees, {}% share of {} against \
         XyzzyCorp's {}%; {}. Source: https://www.{}.com/investors/annual-report-2024#p{}",
        figure(rng, 5),
        rng.pick(&["+", "-"]),
        figure(rng, 25),
        800 + rng.below(12_000),
        figure(rng, 30),
        rng.pick(&SEGMENTS),
        figure(rng, 20),
        rng.pick(&[
            "stronger channel partnerships in Europe",
            "cheaper hardware but weaker analytics",
            "ahead on certifications for utilities",
            "lost two large fleet customers to XyzzyCorp in 2024",
            "prices its platform per device, not per seat",
        ]),
        slug,
        10 + rng.below(90)
    )
}

/// The scripted answers of the research run.
pub struct Answers {
    /// The news search's answer.
    pub news: String,
    /// The filings search's answer (a JSON object).
    pub filings: String,
    /// The competitor search's answer.
    pub competitors: String,
    /// The editor's answer to every review and shortening request.
    pub editor: String,
    /// The writer's brief.
    pub brief: String,
}

impl Answers {
    /// The answers, the same on every run: each search answer at least 1,500 o200k tokens.
    pub fn new() -> Self {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let news = grow(1_500, &mut rng, news_bullet);
        let competitors = grow(1_500, &mut rng, competitor_bullet);
        let mut notes = Vec::new();
        let mut filings = String::new();
        while count(&filings, Tokenizer::O200k) < 1_500 {
            notes.push(filings_note(&mut rng, notes.len()));
            filings = json!({
                "revenue": "$1,842.6 million (FY2024)",
                "growth": "+12.6% over FY2023",
                "sources": ["https://www.sec.gov/Archives/edgar/data/1764925/000176492525000012.htm"],
                "notes": notes,
            })
            .to_string();
        }
        let mut editor = String::new();
        for (theme, bullet) in [
            ("News", news_bullet as fn(&mut XorShift, usize) -> String),
            ("Finances", |rng: &mut XorShift, n| format!("- {}", filings_note(rng, n))),
            ("Competition", competitor_bullet),
        ] {
            let _ = writeln!(editor, "## {theme}\n{}", grow(800, &mut rng, bullet));
        }
        let brief = "# XyzzyCorp: investor brief\n\n## Summary\nXyzzyCorp sells edge sensors and fleet analytics to \
                     logistics, health and energy customers. Revenue grew 12.6% to $1.84 billion in FY2024 while \
                     it expanded in Europe and Asia and signed several multi-year contracts.\n\n## Finances\n\
                     Revenue $1,842.6 million (+12.6%); gross margin near 48%; operating loss narrowing; free cash \
                     flow turned positive in the second half. A Series D raised $180 million at a $4.2 billion \
                     valuation.\n\n## Risks\nA sensor recall and sales cuts in EMEA weigh on bookings; Acme \
                     Dynamics and Frobozz Systems compete on price and channel reach; the new CFO has yet to \
                     publish guidance.\n"
            .to_owned();
        Answers { news, filings, competitors, editor, brief }
    }
}
