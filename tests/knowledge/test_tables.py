"""Tables as tables (issue 51, first part): every table a document holds is kept with its typed columns and rows,
tied to its version and to its document's access; one SELECT runs over one table in an engine that holds only it."""

from __future__ import annotations

import pytest

from knowledge import selectors
from knowledge.compute import QueryRefused, compute, engine, grounded, identifiers, rows_used, schema
from knowledge.ingest.tables import markdown_tables
from knowledge.models import Document, DocumentTable
from tenants.models import Tenant
from tenants.principals import Viewer
from tests.factories import make_folder_source

LEDGER = [("Order", "Region", "Amount", "Shipped", "Status"),
          ("A-1", "West", 1200.5, "2026-03-01", "shipped"), ("A-2", "East", 300, "2026-03-04", "pending"),
          ("A-3", "West", 99.5, "2026-03-05", "shipped"), ("A-4", "North", 250, "2026-04-02", "pending")]  # fmt: skip


def _workbook(path) -> None:  # type: ignore[no-untyped-def]
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Orders"
    sheet.append(["Order ledger, March and April"])  # a title row above the header, as people write them
    sheet.append([])
    for row in LEDGER:
        sheet.append(list(row))
    book.save(path)


def test_spreadsheets_csv_and_markdown_tables_are_kept_typed_and_tied_to_their_version(tenant_a, tmp_path):
    root = tmp_path / "kb"
    root.mkdir()
    _workbook(root / "ledger.xlsx")
    (root / "stock.csv").write_text('SKU,Product,Stock\nS-1,Widget,40\nS-2,"Gadget, large",7\n')
    (root / "prices.md").write_text("# Prices\n\nIntro text.\n\n## Zones\n\n| Zone | Price |\n|---|---|\n"
                                    "| North | 12 |\n| South | 15 |\n")  # fmt: skip
    make_folder_source(tenant=tenant_a, root=root, files={})
    ledger = DocumentTable.objects.get(document__document_key="ledger.xlsx")
    assert ledger.name == "Sheet Orders" and ledger.row_count == 4
    # The title row above the header is not the header: the ledger's columns are.
    types = {c["name"]: c["type"] for c in ledger.columns}
    assert types == {"Order": "text", "Region": "text", "Amount": "number", "Shipped": "date", "Status": "text"}
    assert ledger.row_numbers == [4, 5, 6, 7]
    stock = DocumentTable.objects.get(document__document_key="stock.csv")
    assert [c["name"] for c in stock.columns] == ["SKU", "Product", "Stock"] and stock.rows[1][1] == "Gadget, large"
    assert [c["type"] for c in stock.columns] == ["text", "text", "number"] and stock.row_numbers == [2, 3]
    zones = DocumentTable.objects.get(document__document_key="prices.md")
    assert zones.name == "Zones" and zones.rows == [["North", "12"], ["South", "15"]]
    first = stock.version
    (root / "stock.csv").write_text("SKU,Product,Stock\nS-1,Widget,41\n")
    make_folder_source(tenant=tenant_a, root=root, files={})
    latest = selectors.live_tables(viewer=Viewer.everything(tenant_a)).get(document__document_key="stock.csv")
    assert latest.version != first and latest.rows == [["S-1", "Widget", "41"]]
    assert DocumentTable.objects.filter(version=first).exists()  # the old version keeps its own table


def test_a_sheet_whose_first_row_is_its_header_reads_its_columns_and_types(tenant_a, tmp_path):
    import openpyxl

    root = tmp_path / "kb"
    root.mkdir()
    book = openpyxl.Workbook()
    for row in LEDGER:
        book.active.append(list(row))
    book.save(root / "orders.xlsx")
    make_folder_source(tenant=tenant_a, root=root, files={})
    table = DocumentTable.objects.get()
    assert [(c["name"], c["type"]) for c in table.columns] == [
        ("Order", "text"),
        ("Region", "text"),
        ("Amount", "number"),
        ("Shipped", "date"),
        ("Status", "text"),
    ]
    assert table.row_numbers == [2, 3, 4, 5]  # as the spreadsheet numbers them
    total = compute(table, "SELECT Region, sum(Amount) AS total FROM data GROUP BY Region ORDER BY total DESC")
    assert total.rows == [["West", 1300.0], ["East", 300.0], ["North", 250.0]]
    pending = compute(table, "SELECT count(*), group_concat(_row) FROM data WHERE Status = 'pending' "
                             "AND Shipped >= '2026-03-02'")  # fmt: skip
    assert pending.rows == [[2, "3,5"]]


def test_a_restricted_documents_tables_are_not_the_others_to_compute_over(tenant_a, tmp_path):
    from knowledge import services
    from tenants.services import group_create

    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={
        "salaries.csv": "Name,Salary\nAna,5000\nBo,6000\n", "prices.csv": "Item,Price\nTea,3\n"})  # fmt: skip
    group_create(tenant=tenant_a, name="hr")
    salaries = Document.objects.get(document_key="salaries.csv")
    services.document_set_access(tenant=tenant_a, document=salaries, access=["group:hr"])
    staff = Viewer(tenant=tenant_a, principals=["tenant"])
    hr = Viewer(tenant=tenant_a, principals=["tenant", "group:hr"])
    seen = {t.document.document_key for t in selectors.live_tables(viewer=staff)}
    assert seen == {"prices.csv"}
    assert {t.document.document_key for t in selectors.live_tables(viewer=hr)} == {"prices.csv", "salaries.csv"}
    other = Tenant.objects.create(slug="globex", name="Globex")
    assert not selectors.live_tables(viewer=Viewer.everything(other)).exists()  # another tenant: nothing


class _Table:
    columns = [{"name": "Region", "type": "text"}, {"name": "Amount", "type": "number"},
               {"name": 'x"; DROP TABLE data; --', "type": "text"}]  # fmt: skip
    rows = [["West", "1,200.50", '=HYPERLINK("http://evil")'], ["East", "300", "' OR 1=1 --"]]
    row_numbers = [2, 3]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM sqlite_master", "SELECT * FROM pragma_table_info('data')", "ATTACH DATABASE ':memory:' AS x",
    "PRAGMA table_info(data)", "DELETE FROM data", "UPDATE data SET Amount = 0", "DROP TABLE data",
    "CREATE TEMP TABLE y(a)", "SELECT load_extension('x')", "SELECT 1; SELECT 2", "SELEC nonsense",
    "INSERT INTO data VALUES (1, 'a', 2, 'b')",
])  # fmt: skip
def test_the_engine_runs_one_select_over_its_one_table_and_refuses_anything_else(sql):
    with pytest.raises(QueryRefused):
        compute(_Table(), sql)


def test_hostile_cells_and_column_names_stay_data_and_limits_hold():
    assert identifiers(_Table.columns) == ["region", "amount", "x_drop_table_data"]  # the engine's names: words only
    odd = compute(_Table(), "SELECT x_drop_table_data, _row FROM data ORDER BY _row")
    assert odd.rows == [['=HYPERLINK("http://evil")', 2], ["' OR 1=1 --", 3]]
    assert compute(_Table(), "SELECT sum(Amount) FROM data").rows == [[1500.5]]

    class Big:
        columns = [{"name": "n", "type": "number"}]
        rows = [[str(n)] for n in range(3000)]
        row_numbers = list(range(2, 3002))

    capped = compute(Big(), "SELECT n FROM data", max_rows=50)
    assert len(capped.rows) == 50 and capped.truncated
    with pytest.raises(QueryRefused, match="time limit"):
        compute(Big(), "SELECT count(*) FROM data a, data b, data c", time_limit_s=0.2)


def test_markdown_tables_are_named_by_their_heading_and_keep_escaped_pipes():
    tables = markdown_tables("# Doc\n\n## Codes\n\n| Code | Meaning |\n|---|---|\n| a\\|b | either |\n", "doc.md")
    assert tables[0].name == "Codes" and tables[0].rows == [["a|b", "either"]] and tables[0].row_numbers == [7]


def test_column_identifiers_are_words_once_each_and_never_a_keyword():
    columns = [{"name": n} for n in ("Order", "Unit price", "Unit-price", "2025 total", "Año", "", "_row")]
    assert identifiers(columns) == ["order_", "unit_price", "unit_price_2", "c_2025_total", "ano", "column_", "row_"]


def test_the_rows_a_result_stands_on_are_those_its_filter_keeps_within_the_groups_it_shows():
    with engine(_Ledger()) as db:
        total = "SELECT SUM(amount) AS total FROM data WHERE region = 'west'"
        where = compute(_Ledger(), total)
        assert where.rows == [[1300.0]]  # text compares without case
        assert rows_used(db, total, where).rows == [2, 4]
        top = "SELECT region, COUNT(*) AS n FROM data GROUP BY region ORDER BY n DESC LIMIT 1"
        used = rows_used(db, top, compute(_Ledger(), top))
        assert used is not None and used.rows == [2, 4] and used.count == 2
        listed = "SELECT sku FROM data WHERE amount < 500 ORDER BY amount"
        assert rows_used(db, listed, compute(_Ledger(), listed)).rows == [4, 3]  # the rows it returned
        assert rows_used(db, "SELEC nonsense", where) is None


def test_a_query_whose_rows_cannot_be_listed_gives_no_row_citation_and_no_error():
    class Big:
        columns = [{"name": "n", "type": "number"}]
        rows = [[str(n)] for n in range(3000)]
        row_numbers = list(range(2, 3002))

    endless = "SELECT a.n FROM data a, data b, data c"  # a self-join: its rows are no row of the table
    with engine(Big()) as db:
        assert rows_used(db, endless, compute(Big(), "SELECT 1 AS n FROM data LIMIT 1")) is None


def test_a_filter_on_the_wrong_column_is_moved_and_one_the_question_never_asked_for_is_dropped():
    moved, changes = grounded("SELECT COUNT(*) FROM data WHERE region = 'Globex'", _Ledger(), "How many from Globex?")
    assert moved == "SELECT COUNT(*) FROM data WHERE customer = 'Globex'" and changes
    invented = "SELECT SUM(amount) FROM data WHERE region = 'East' AND customer = 'Acme'"
    dropped, changes = grounded(invented, _Ledger(), "What did Acme order in total?")
    assert compute(_Ledger(), dropped).rows == [[1900.0]] and "region" in changes[0]
    kept = "SELECT COUNT(*) FROM data WHERE region = 'West'"
    assert grounded(kept, _Ledger(), "How many orders in the West?") == (kept, [])


def test_the_schema_the_model_reads_names_each_column_its_values_and_ranges():
    text = schema(_Ledger())
    assert "region TEXT, -- \"Region\", one of 'West', 'East', 'North'" in text
    assert 'amount REAL, -- "Amount", from 99.5 to 1200.5' in text
    assert "shipped TEXT, -- \"Shipped\", a date 'YYYY-MM-DD' from '2026-03-01' to '2026-04-02'" in text


class _Ledger:
    columns = [{"name": "Order", "type": "text"}, {"name": "Region", "type": "text"},
               {"name": "Customer", "type": "text"}, {"name": "Amount", "type": "number"},
               {"name": "Shipped", "type": "date"}, {"name": "SKU", "type": "text"}]  # fmt: skip
    rows = [["A-1", "West", "Acme", "1,200.50", "2026-03-01", "S1"],
            ["A-2", "East", "Globex", "300", "2026-03-04", "S2"],
            ["A-3", "West", "Acme", "99.5", "2026-03-05", "S3"],
            ["A-4", "North", "Acme", "600", "2026-04-02", "S4"]]  # fmt: skip
    row_numbers = [2, 3, 4, 5]


def test_an_html_pages_tables_are_kept_as_tables(tenant_a, tmp_path):
    page = ("<html><head><title>Rates</title></head><body><h1>Rates</h1><h2>Shipping</h2><table>"
            "<tr><th>Zone</th><th>Price</th></tr><tr><td>North</td><td>12</td></tr><tr><td>South</td><td>15.5</td></tr>"
            "</table></body></html>")  # fmt: skip
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"rates.html": page})
    table = DocumentTable.objects.get(document__document_key="rates.html")
    assert [(c["name"], c["type"]) for c in table.columns] == [("Zone", "text"), ("Price", "number")]
    assert table.rows == [["North", "12"], ["South", "15.5"]] and table.name == "Shipping"
    assert compute(table, "SELECT SUM(price) FROM data").rows == [[27.5]]
