# ruff: noqa: RUF001 - Persian, Turkish, Russian and Arabic letters are the point here
"""The generator's vocabulary: kinds of memory, each written and asked about in five languages.

Two catalogues, with no key, sentence or value in common: ``TUNING`` builds the first half of
every generated set (thresholds and any tuning look only at it), ``HELD_OUT`` the second (the
report's headline). Every sentence was written by hand as someone would say it in that
language (English, Persian, Turkish, Russian, Arabic); a value is a structured token (what a
decision acts on) beside how each language says it inside a memory's sentence.

Per kind of memory:

* ``memory``: how an agent writes it down, with ``{v}`` for the value's phrase;
* ``query``: how an agent asks for it directly (it may share words with the memory);
* ``inflected``: the same question with the memory's words in another form;
* ``paraphrase``: English, asked by someone who never saw the memory: no content word in common
  with any of its English sentences or its key (checked by the generator);
* ``lookalikes``: other memories of the subject that look relevant (they share the question's
  words) but answer something else: the noise of every decision and the distractors of one
  class.
"""

from __future__ import annotations

from dataclasses import dataclass

LANGUAGES = ("en", "fa", "tr", "ru", "ar")


def _langs(*phrases: str) -> dict[str, str]:
    """A value's phrase in each language, given in the order of ``LANGUAGES``."""
    return dict(zip(LANGUAGES, phrases, strict=True))


@dataclass(frozen=True)
class Kind:
    key: str
    domain: str
    task_types: tuple[str, str]
    other_domain: str  # where the same key is a different fact (the wrong-scope class)
    default: str
    sensitivity: str
    values: dict[str, dict[str, str]]  # value -> language -> phrase
    memory: dict[str, str]
    query: dict[str, str]
    inflected: dict[str, str]
    paraphrase: tuple[str, ...]
    lookalikes: tuple[tuple[str, str], ...]


TUNING: tuple[Kind, ...] = (
    Kind(
        key="delivery.window",
        domain="commerce",
        task_types=("checkout", "returns"),
        other_domain="support",
        default="any time",
        sensitivity="personal",
        values={
            "morning": _langs("in the morning", "صبح", "sabah", "утром", "في الصباح"),
            "evening": _langs("in the evening", "عصر", "akşam", "вечером", "في المساء"),
            "weekend": _langs(
                "at the weekend", "آخر هفته", "hafta sonu", "в выходные", "في عطلة نهاية الأسبوع"
            ),
        },
        memory={
            "en": "The customer wants parcels delivered {v}",
            "fa": "مشتری می‌خواهد بسته‌ها {v} تحویل داده شوند",
            "tr": "Müşteri paketlerin {v} teslim edilmesini istiyor",
            "ru": "Клиент просит доставлять посылки {v}",
            "ar": "يريد العميل استلام الطرود {v}",
        },
        query={
            "en": "When should this customer's order be delivered?",
            "fa": "سفارش این مشتری چه زمانی باید تحویل داده شود؟",
            "tr": "Bu müşterinin siparişi ne zaman teslim edilmeli?",
            "ru": "Когда доставить заказ этого клиента?",
            "ar": "متى يجب تسليم طلب هذا العميل؟",
        },
        inflected={
            "en": "What time do deliveries to this customer go out?",
            "fa": "تحویل‌ها به این مشتری چه ساعتی انجام شود؟",
            "tr": "Bu müşteriye teslimatlar ne zaman yapılmalı?",
            "ru": "В какое время доставляют посылки клиенту?",
            "ar": "في أي وقت تُسلَّم طرود العميل؟",
        },
        paraphrase=(
            "What time of day suits them for receiving a package?",
            "At which hour is somebody home to take in a box for them?",
        ),
        lookalikes=(
            ("delivery.address", "The customer's orders are delivered to the office reception"),
            ("delivery.instructions", "Ring twice when an order is delivered to this customer"),
            ("delivery.carrier", "This customer's orders are delivered by the courier service"),
            ("delivery.packaging", "The customer wants each order delivered without plastic"),
            ("delivery.notification", "Text the customer when the order is out for delivery"),
            ("delivery.signature", "Orders delivered to this customer need a signature"),
        ),
    ),
    Kind(
        key="contact.channel",
        domain="support",
        task_types=("chat", "email"),
        other_domain="legal",
        default="email",
        sensitivity="personal",
        values={
            "phone": _langs("by phone", "تلفنی", "telefonla", "по телефону", "عبر الهاتف"),
            "sms": _langs("by text message", "با پیامک", "kısa mesajla", "по SMS", "برسالة نصية"),
            "letter": _langs("by letter", "با نامه", "mektupla", "письмом", "برسالة بريدية"),
        },
        memory={
            "en": "The customer prefers to be contacted {v}",
            "fa": "مشتری ترجیح می‌دهد پیگیری‌ها {v} انجام شود",
            "tr": "Müşteri kendisiyle {v} iletişim kurulmasını tercih ediyor",
            "ru": "Клиент предпочитает, чтобы с ним связывались {v}",
            "ar": "يفضّل العميل أن يتم التواصل معه {v}",
        },
        query={
            "en": "How should we contact this customer about the ticket?",
            "fa": "درباره این تیکت چگونه با مشتری تماس بگیریم؟",
            "tr": "Bu talep hakkında müşteriyle nasıl iletişim kuralım?",
            "ru": "Как связаться с клиентом по этому обращению?",
            "ar": "كيف نتواصل مع العميل بشأن هذه التذكرة؟",
        },
        inflected={
            "en": "What is the preferred way of contacting customers like this one?",
            "fa": "راه ترجیحی برای تماس‌گرفتن با این مشتری چیست؟",
            "tr": "Müşteriye ulaşmak için tercih edilen iletişim yolu nedir?",
            "ru": "Каким способом связаться с этим клиентом?",
            "ar": "ما الطريقة المفضلة للتواصل مع هذا العميل؟",
        },
        paraphrase=(
            "Which way of reaching them do they like best?",
            "If we need to get hold of them again, what works for them?",
        ),
        lookalikes=(
            ("contact.hours", "Only contact this customer between nine and five"),
            ("contact.person", "Contact the customer's assistant for scheduling questions"),
            ("contact.address", "The customer's contact address is on the account page"),
            ("ticket.priority", "Tickets from this customer are handled with high priority"),
            ("contact.tone", "Contact this customer in plain language without jargon"),
            ("ticket.owner", "The same agent should handle every ticket of this customer"),
        ),
    ),
    Kind(
        key="statement.format",
        domain="finance",
        task_types=("reporting", "payouts"),
        other_domain="commerce",
        default="pdf",
        sensitivity="internal",
        values={
            "pdf": _langs("as a PDF", "به صورت PDF", "PDF olarak", "в формате PDF", "بصيغة PDF"),
            "spreadsheet": _langs(
                "as a spreadsheet",
                "به صورت صفحه‌گسترده",
                "elektronik tablo olarak",
                "в виде электронной таблицы",
                "كجدول بيانات",
            ),
            "paper": _langs(
                "on paper by post",
                "به صورت کاغذی با پست",
                "kâğıt olarak postayla",
                "на бумаге по почте",
                "ورقيًا بالبريد",
            ),
        },
        memory={
            "en": "Monthly statements should be sent {v}",
            "fa": "صورت‌حساب‌های ماهانه باید {v} ارسال شوند",
            "tr": "Aylık hesap özetleri {v} gönderilmeli",
            "ru": "Ежемесячные выписки нужно отправлять {v}",
            "ar": "يجب إرسال الكشوف الشهرية {v}",
        },
        query={
            "en": "In what format should the monthly statement be sent?",
            "fa": "صورت‌حساب ماهانه با چه قالبی ارسال شود؟",
            "tr": "Aylık hesap özeti hangi biçimde gönderilsin?",
            "ru": "В каком формате отправить ежемесячную выписку?",
            "ar": "بأي صيغة نرسل الكشف الشهري؟",
        },
        inflected={
            "en": "Sending the statements each month: which format?",
            "fa": "ارسال صورت‌حساب ماهانه به چه شکلی باشد؟",
            "tr": "Aylık özetleri hangi biçimde gönderelim?",
            "ru": "Как отправлять ежемесячные выписки?",
            "ar": "كيف نرسل كشوف الحساب الشهرية؟",
        },
        paraphrase=(
            "How would they like to get their periodic account summary?",
            "What kind of file do they want for the regular overview of their balance?",
        ),
        lookalikes=(
            ("statement.language", "Monthly statements should be written in German"),
            ("statement.recipient", "Send the monthly statement to the finance director"),
            ("statement.day", "The statement is sent on the first working day of the month"),
            ("payout.schedule", "Payouts are sent every two weeks"),
            ("statement.currency", "Show amounts on the monthly statement in euros"),
            ("invoice.reference", "Invoices should be sent with a purchase order number"),
        ),
    ),
    Kind(
        key="appointment.slot",
        domain="health",
        task_types=("scheduling", "triage"),
        other_domain="commerce",
        default="first free slot",
        sensitivity="restricted",
        values={
            "early morning": _langs(
                "early in the morning",
                "صبح زود",
                "sabah erken saatte",
                "рано утром",
                "في الصباح الباكر",
            ),
            "afternoon": _langs(
                "in the afternoon", "بعدازظهر", "öğleden sonra", "после обеда", "بعد الظهر"
            ),
            "fridays": _langs(
                "on Fridays", "روزهای جمعه", "cuma günleri", "по пятницам", "أيام الجمعة"
            ),
        },
        memory={
            "en": "The patient can only attend clinic visits {v}",
            "fa": "بیمار فقط {v} می‌تواند به درمانگاه بیاید",
            "tr": "Hasta kliniğe yalnızca {v} gelebiliyor",
            "ru": "Пациент может приходить в клинику только {v}",
            "ar": "لا يستطيع المريض حضور مواعيد العيادة إلا {v}",
        },
        query={
            "en": "When should the clinic book this patient's visit?",
            "fa": "درمانگاه چه زمانی برای این بیمار نوبت بگذارد؟",
            "tr": "Klinik bu hasta için randevuyu ne zaman vermeli?",
            "ru": "На какое время клинике записать этого пациента?",
            "ar": "متى يجب أن تحجز العيادة موعد هذا المريض؟",
        },
        inflected={
            "en": "Booking visits for the patient: which times work?",
            "fa": "برای نوبت‌دهی به این بیمار چه ساعتی مناسب است؟",
            "tr": "Hastanın randevusu hangi saate alınsın?",
            "ru": "В какие часы записывать пациента на приём?",
            "ar": "في أي وقت نحجز للمريض؟",
        },
        paraphrase=(
            "At what hour is this person able to come in for a check-up?",
            "Which part of the week suits them for seeing the doctor?",
        ),
        lookalikes=(
            ("appointment.doctor", "The patient wants every clinic visit with the same doctor"),
            ("appointment.reminder", "Remind the patient of a clinic visit a day before"),
            ("appointment.length", "The patient's clinic visits need a double-length slot"),
            ("appointment.interpreter", "Book an interpreter for the patient's visits"),
            ("appointment.transport", "The patient needs transport to clinic visits"),
            ("appointment.location", "The patient prefers the clinic on the north campus"),
        ),
    ),
)

HELD_OUT: tuple[Kind, ...] = (
    Kind(
        key="payment.method",
        domain="commerce",
        task_types=("checkout", "subscriptions"),
        other_domain="finance",
        default="ask at checkout",
        sensitivity="personal",
        values={
            "card": _langs(
                "by credit card",
                "با کارت اعتباری",
                "kredi kartıyla",
                "кредитной картой",
                "ببطاقة الائتمان",
            ),
            "invoice": _langs("on invoice", "با فاکتور", "faturayla", "по счёту", "بفاتورة"),
            "bank transfer": _langs(
                "by bank transfer",
                "با حواله بانکی",
                "banka havalesiyle",
                "банковским переводом",
                "بتحويل مصرفي",
            ),
        },
        memory={
            "en": "This buyer always pays {v}",
            "fa": "این خریدار همیشه {v} پرداخت می‌کند",
            "tr": "Bu alıcı her zaman {v} ödüyor",
            "ru": "Этот покупатель всегда платит {v}",
            "ar": "يدفع هذا المشتري دائمًا {v}",
        },
        query={
            "en": "How will this buyer pay for the order?",
            "fa": "این خریدار هزینه سفارش را چگونه پرداخت می‌کند؟",
            "tr": "Bu alıcı sipariş için nasıl ödeme yapacak?",
            "ru": "Как этот покупатель оплатит заказ?",
            "ar": "كيف سيدفع هذا المشتري ثمن الطلب؟",
        },
        inflected={
            "en": "Which payment did the buyer use for earlier purchases?",
            "fa": "پرداخت‌های این خریدار معمولاً چگونه است؟",
            "tr": "Alıcının ödemeleri nasıl yapılıyor?",
            "ru": "Какой способ оплаты у покупателя?",
            "ar": "ما طريقة الدفع لدى هذا المشتري؟",
        },
        paraphrase=(
            "What does this shopper settle their bills with?",
            "How do they usually cover what they owe us?",
        ),
        lookalikes=(
            ("payment.terms", "This buyer pays within thirty days of the order"),
            ("payment.currency", "The buyer pays for every order in Swiss francs"),
            ("order.approval", "Orders from this buyer above 500 euros need approval"),
            ("payment.installments", "This buyer may pay for large orders in three parts"),
            ("order.reference", "The buyer wants a purchase reference on each order"),
            ("payment.reminder", "Send the buyer a reminder when a payment is late"),
        ),
    ),
    Kind(
        key="answer.length",
        domain="support",
        task_types=("chat", "email"),
        other_domain="legal",
        default="standard",
        sensitivity="internal",
        values={
            "short": _langs(
                "short and to the point",
                "کوتاه و مختصر",
                "kısa ve öz",
                "короткими и по делу",
                "قصيرة ومباشرة",
            ),
            "detailed": _langs(
                "detailed, with every step explained",
                "مفصل و با توضیح همه مراحل",
                "her adımı açıklayan ayrıntılı biçimde",
                "подробными, с объяснением каждого шага",
                "مفصلة مع شرح كل خطوة",
            ),
            "bullet points": _langs(
                "as a few bullet points",
                "به شکل چند نکته فهرست‌وار",
                "birkaç madde halinde",
                "в виде нескольких пунктов",
                "على شكل نقاط قليلة",
            ),
        },
        memory={
            "en": "The customer likes replies {v}",
            "fa": "مشتری پاسخ‌ها را {v} دوست دارد",
            "tr": "Müşteri yanıtları {v} istiyor",
            "ru": "Клиент хочет, чтобы ответы были {v}",
            "ar": "يفضّل العميل أن تكون الردود {v}",
        },
        query={
            "en": "How long should the reply to this customer be?",
            "fa": "پاسخ به این مشتری چقدر باید طولانی باشد؟",
            "tr": "Bu müşteriye verilecek yanıt ne uzunlukta olmalı?",
            "ru": "Насколько длинным должен быть ответ этому клиенту?",
            "ar": "ما الطول المناسب للرد على هذا العميل؟",
        },
        inflected={
            "en": "How long should replies to customers like this be?",
            "fa": "پاسخ‌های ما به این مشتری چه اندازه باشند؟",
            "tr": "Müşteriye yanıtlarımız ne kadar uzun olmalı?",
            "ru": "Какой длины делать ответы клиенту?",
            "ar": "ما طول الردود المناسبة لهذا العميل؟",
        },
        paraphrase=(
            "Does this person want brief or thorough messages from us?",
            "How much should we write when we get back to them?",
        ),
        lookalikes=(
            ("answer.tone", "The customer likes replies that sound friendly"),
            ("answer.language", "Replies to this customer should be in Spanish"),
            ("reply.signature", "Sign every reply to the customer with the agent's first name"),
            ("reply.time", "The customer expects a reply within the hour"),
            ("answer.links", "Replies to the customer should link to the help centre"),
            ("reply.device", "The customer reads replies on a mobile phone"),
        ),
    ),
    Kind(
        key="seat.preference",
        domain="travel",
        task_types=("booking", "changes"),
        other_domain="commerce",
        default="any seat",
        sensitivity="personal",
        values={
            "window": _langs(
                "a window seat",
                "صندلی کنار پنجره",
                "cam kenarı koltuk",
                "место у окна",
                "مقعدًا بجانب النافذة",
            ),
            "aisle": _langs(
                "an aisle seat",
                "صندلی کنار راهرو",
                "koridor tarafında koltuk",
                "место у прохода",
                "مقعدًا بجانب الممر",
            ),
            "front rows": _langs(
                "a seat near the front",
                "صندلی ردیف‌های جلو",
                "ön sıralarda bir koltuk",
                "место в передних рядах",
                "مقعدًا في الصفوف الأمامية",
            ),
        },
        memory={
            "en": "The traveller always asks for {v}",
            "fa": "این مسافر همیشه {v} می‌خواهد",
            "tr": "Yolcu her zaman {v} istiyor",
            "ru": "Пассажир всегда просит {v}",
            "ar": "يطلب المسافر دائمًا {v}",
        },
        query={
            "en": "Which seat should we book for this traveller?",
            "fa": "برای این مسافر چه صندلی‌ای رزرو کنیم؟",
            "tr": "Bu yolcu için hangi koltuğu ayıralım?",
            "ru": "Какое место забронировать для этого пассажира?",
            "ar": "أي مقعد نحجز لهذا المسافر؟",
        },
        inflected={
            "en": "Which seats has the traveller asked for before?",
            "fa": "این مسافر معمولاً کدام صندلی‌ها را می‌خواهد؟",
            "tr": "Yolcunun koltuk tercihleri nedir?",
            "ru": "Какие места обычно выбирает пассажир?",
            "ar": "ما المقاعد التي يفضلها المسافر؟",
        },
        paraphrase=(
            "Where on the plane does this flyer like to sit?",
            "On board, which spot makes them most comfortable?",
        ),
        lookalikes=(
            ("meal.preference", "The traveller always asks for a vegetarian meal"),
            ("seat.legroom", "The traveller needs a seat with extra legroom on long flights"),
            ("baggage.allowance", "Book this traveller a fare with two checked bags"),
            ("loyalty.number", "Add the traveller's frequent flyer number to every booking"),
            ("travel.class", "The traveller books economy for short trips"),
            ("seat.companion", "Seat the traveller next to their colleague when possible"),
        ),
    ),
    Kind(
        key="governing.law",
        domain="legal",
        task_types=("contract_review", "drafting"),
        other_domain="support",
        default="ask counsel",
        sensitivity="internal",
        values={
            "german law": _langs(
                "German law", "قانون آلمان", "Alman hukuku", "немецкое право", "القانون الألماني"
            ),
            "english law": _langs(
                "English law",
                "قانون انگلستان",
                "İngiliz hukuku",
                "английское право",
                "القانون الإنجليزي",
            ),
            "swiss law": _langs(
                "Swiss law",
                "قانون سوئیس",
                "İsviçre hukuku",
                "швейцарское право",
                "القانون السويسري",
            ),
        },
        memory={
            "en": "Agreements with this client are governed by {v}",
            "fa": "قراردادهای این موکل تابع {v} است",
            "tr": "Bu müvekkille yapılan sözleşmelere {v} uygulanıyor",
            "ru": "К договорам с этим клиентом применяется {v}",
            "ar": "تخضع اتفاقيات هذا الموكّل لأحكام {v}",
        },
        query={
            "en": "Which law governs this client's contract?",
            "fa": "قرارداد این موکل تابع کدام قانون است؟",
            "tr": "Bu müvekkilin sözleşmesine hangi hukuk uygulanır?",
            "ru": "Какое право применяется к договору этого клиента?",
            "ar": "ما القانون الذي يحكم عقد هذا الموكّل؟",
        },
        inflected={
            "en": "Governing law for the client's agreement?",
            "fa": "قانون حاکم بر قراردادهای این موکل چیست؟",
            "tr": "Müvekkilin sözleşmelerinde hangi hukuk geçerli?",
            "ru": "Каким правом регулируются договоры клиента?",
            "ar": "ما القانون الحاكم لاتفاقيات الموكّل؟",
        },
        paraphrase=(
            "Under which country's legal system would a dispute with them be settled?",
            "Whose courts and statutes decide a quarrel over the deal we signed with them?",
        ),
        lookalikes=(
            ("contract.language", "Agreements with this client are drafted in English"),
            ("contract.signatory", "Agreements with this client are signed by its general counsel"),
            ("dispute.forum", "Disputes with this client go to arbitration in Zurich"),
            ("contract.term", "The client's agreements run for three years"),
            ("contract.review", "Every agreement with the client needs a second lawyer's review"),
            ("contract.template", "Use the client's own template for new agreements"),
        ),
    ),
)
