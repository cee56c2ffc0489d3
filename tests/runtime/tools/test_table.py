"""A CSV table's figures in read_file's result: computed by code from the file as it is on disk."""

from __future__ import annotations

from runtime.artifacts import ArtifactStore
from runtime.tools import ToolContext, execute
from runtime.tools.builtin import builtin_registry
from runtime.tools.table import figures
from tests.helpers import workspace_of

ORDERS = (
    "id,date,product,amount,customer\n"
    "245,2026-05-14,notebook,82.25,Joost\n"
    "246,2026-05-09,cable,90.75,Joost\n"
    "247,2026-05-04,backpack,2,Sanne\n"
    "248,2026-05-04,mug,29.50,Sanne\n"
)


def test_each_number_column_has_its_sum_smallest_and_largest_with_their_rows() -> None:
    columns, _ = figures(ORDERS)
    assert columns == [{
        "column": "amount", "sum": "204.50",
        "smallest": "2.00 in the row 247,2026-05-04,backpack,2,Sanne",
        "largest": "90.75 in the row 246,2026-05-09,cable,90.75,Joost",
    }]


def test_sums_are_given_for_each_value_of_a_column_whose_values_repeat() -> None:
    _, by = figures(ORDERS)
    assert by == [{"column": "amount", "by": "customer", "Joost": "173.00", "Sanne": "31.50"}]


def test_ids_dates_and_a_name_per_row_are_no_figures_and_group_nothing() -> None:
    columns, by = figures(ORDERS)
    assert [c["column"] for c in columns] == ["amount"], "the id column's sum would mean nothing"
    assert {b["by"] for b in by} == {"customer"}, "product names each row once; dates are not groups"


def test_whole_numbers_stay_whole() -> None:
    columns, _ = figures("species,count\nrobin,5\nwren,11\nrobin,3\n")
    assert (columns[0]["sum"], columns[0]["largest"]) == ("19", "11 in the row wren,11")


def test_text_that_is_no_table_has_no_figures() -> None:
    assert figures("just one line\n") is None
    assert figures("a,b\n1,2\n") is None, "one record: nothing to add up"
    assert figures("a,b\n1,2\n3\n4,5\n") is None, "ragged rows"
    assert figures("name,role\nAna,dev\nBen,ops\nCy,dev\n") is None, "no number column"


def test_read_file_gives_a_csv_files_figures_and_no_other_files(tmp_path) -> None:

    ws = workspace_of(tmp_path, {"orders.csv": ORDERS, "notes.txt": ORDERS})
    ctx = ToolContext(task_id="t-1", tenant="default", actor="ann", workspace=ws,
                      artifacts=ArtifactStore(tmp_path / "artifacts"))
    read = builtin_registry().get("read_file")
    csv_result = execute(read, ctx, {"path": "orders.csv"}).observation
    assert csv_result["columns"][0]["sum"] == "204.50" and csv_result["sums_by"][0]["Joost"] == "173.00"
    text_result = execute(read, ctx, {"path": "notes.txt"}).observation
    assert text_result.get("columns") is None and text_result.get("sums_by") is None
