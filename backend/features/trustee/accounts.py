"""The default chart of accounts (Swiss SME chart, KMU-Kontenrahmen) and the current Swiss VAT codes.

Every Trustee instance starts with these (seeded on first use) and may edit its own copy. VAT rates
are those in force since 1 January 2024: 8.1 % normal, 2.6 % reduced, 3.8 % accommodation, 0 %
exempt. The codes follow Bexio's naming (VM = input tax on material and services, VI = input tax on
investments and other operating expenses, UN/UR/UB = output tax normal/reduced/accommodation), so a
sync finds the same code there.
"""

from __future__ import annotations

from dataclasses import dataclass

ASSET, LIABILITY, EQUITY, REVENUE, EXPENSE = "asset", "liability", "equity", "revenue", "expense"
KINDS = (ASSET, LIABILITY, EQUITY, REVENUE, EXPENSE)

CASH, BANK = "1000", "1020"
INPUT_TAX, INPUT_TAX_INVESTMENTS = "1170", "1171"
CREDITORS, VAT_OWED = "2000", "2200"

# (number, name, kind)
SME_CHART: tuple[tuple[str, str, str], ...] = (
    ("1000", "Kasse", ASSET),
    ("1020", "Bank", ASSET),
    ("1100", "Forderungen aus Lieferungen und Leistungen (Debitoren)", ASSET),
    ("1170", "Vorsteuer MWST Material, Waren, Dienstleistungen, Energie", ASSET),
    ("1171", "Vorsteuer MWST Investitionen, übriger Betriebsaufwand", ASSET),
    ("1200", "Handelswaren", ASSET),
    ("1300", "Aktive Rechnungsabgrenzungen", ASSET),
    ("1500", "Maschinen und Apparate", ASSET),
    ("1510", "Mobiliar und Einrichtungen", ASSET),
    ("1520", "Büromaschinen, Informatik, Kommunikationstechnologie", ASSET),
    ("1530", "Fahrzeuge", ASSET),
    ("2000", "Verbindlichkeiten aus Lieferungen und Leistungen (Kreditoren)", LIABILITY),
    ("2200", "Geschuldete MWST (Umsatzsteuer)", LIABILITY),
    ("2270", "Sozialversicherungen und Vorsorgeeinrichtungen", LIABILITY),
    ("2300", "Passive Rechnungsabgrenzungen", LIABILITY),
    ("2800", "Eigenkapital (Grund-, Stammkapital)", EQUITY),
    ("2970", "Gewinnvortrag / Verlustvortrag", EQUITY),
    ("3200", "Handelserlöse", REVENUE),
    ("3400", "Dienstleistungserlöse", REVENUE),
    ("3800", "Erlösminderungen", REVENUE),
    ("4000", "Materialaufwand", EXPENSE),
    ("4200", "Handelswarenaufwand", EXPENSE),
    ("4400", "Aufwand für bezogene Dienstleistungen", EXPENSE),
    ("5000", "Lohnaufwand", EXPENSE),
    ("5700", "Sozialversicherungsaufwand", EXPENSE),
    ("5800", "Übriger Personalaufwand", EXPENSE),
    ("6000", "Raumaufwand (Miete)", EXPENSE),
    ("6100", "Unterhalt, Reparaturen, Ersatz (URE)", EXPENSE),
    ("6200", "Fahrzeug- und Transportaufwand", EXPENSE),
    ("6300", "Sachversicherungen, Abgaben, Gebühren", EXPENSE),
    ("6400", "Energie- und Entsorgungsaufwand", EXPENSE),
    ("6500", "Verwaltungsaufwand (Büromaterial)", EXPENSE),
    ("6510", "Telefon, Internet, Porti", EXPENSE),
    ("6530", "Buchführungs- und Beratungsaufwand", EXPENSE),
    ("6570", "Informatikaufwand (Software, Lizenzen, Hosting)", EXPENSE),
    ("6600", "Werbeaufwand", EXPENSE),
    ("6640", "Reisespesen", EXPENSE),
    ("6641", "Kundenbetreuung, Bewirtung", EXPENSE),
    ("6700", "Sonstiger Betriebsaufwand", EXPENSE),
    ("6800", "Finanzaufwand", EXPENSE),
    ("6900", "Abschreibungen", EXPENSE),
    ("8900", "Direkte Steuern", EXPENSE),
)


@dataclass(frozen=True)
class VatSpec:
    code: str
    rate: float
    label: str
    account: str | None


# Input tax (purchases) first: receipts are mostly purchases.
SWISS_VAT_CODES: tuple[VatSpec, ...] = (
    VatSpec("VM81", 8.1, "Vorsteuer 8.1 % Material und Dienstleistungen (Normalsatz)", INPUT_TAX),
    VatSpec("VM26", 2.6, "Vorsteuer 2.6 % Material und Dienstleistungen (reduzierter Satz)", INPUT_TAX),
    VatSpec("VM38", 3.8, "Vorsteuer 3.8 % Beherbergung (Sondersatz)", INPUT_TAX),
    VatSpec("VI81", 8.1, "Vorsteuer 8.1 % Investitionen und übriger Betriebsaufwand", INPUT_TAX_INVESTMENTS),
    VatSpec("VI26", 2.6, "Vorsteuer 2.6 % Investitionen und übriger Betriebsaufwand", INPUT_TAX_INVESTMENTS),
    VatSpec("VI38", 3.8, "Vorsteuer 3.8 % Beherbergung, übriger Betriebsaufwand", INPUT_TAX_INVESTMENTS),
    VatSpec("UN81", 8.1, "Umsatzsteuer 8.1 % (Normalsatz)", VAT_OWED),
    VatSpec("UR26", 2.6, "Umsatzsteuer 2.6 % (reduzierter Satz)", VAT_OWED),
    VatSpec("UB38", 3.8, "Umsatzsteuer 3.8 % Beherbergung (Sondersatz)", VAT_OWED),
    VatSpec("FREI", 0.0, "Ohne MWST (befreit oder ausgenommen, 0 %)", None),
)

# The purchase code of each rate, for a receipt that gives only a rate.
INPUT_CODE_BY_RATE = {8.1: "VM81", 2.6: "VM26", 3.8: "VM38", 0.0: "FREI"}


def vat_of(net: float, rate: float) -> float:
    """The VAT on a net amount at `rate` percent, rounded to 5 Rappen as Swiss receipts are."""
    return round(round(net * rate / 100 * 20) / 20, 2)


def vat_in_gross(gross: float, rate: float) -> float:
    """The VAT contained in a gross amount at `rate` percent, rounded to the Rappen."""
    return round(gross * rate / (100 + rate), 2)
